"""Purgatory throughput: a port of Kafka's TestPurgatoryPerformance.

Workload (as in Kafka's ``kafka.TestPurgatoryPerformance``): requests arrive
as a Poisson process at ``--rate`` per second; each one is a delayed operation
with a ``--timeout-ms`` deadline, watched under ``--keys`` keys drawn from a
key space of ``--key-space``; its time to become completable is drawn from a
log-normal distribution given by its median (``--pct50``) and 75th
percentile (``--pct75``).  Kafka's completion thread calls ``forceComplete``;
here a completion *event* marks the request completable and calls
``check_and_complete`` on its first key, which tries every operation watching
that key (the broker's real path, and the dearer one).  Requests whose latency
exceeds the timeout are never made completable: the timer expires them.

Both purgatories run the same driver in one process: arrivals and completion
events on the main thread, expirations on the timer's threads.  Reported per
run: the target rate (requests / last scheduled arrival), the achieved rate
(requests / time to submit them all; it falls below the target when the
purgatory cannot keep up), process CPU time (all threads) and CPU per request,
the share completed early and expired, the peak RSS growth, and the largest
backlog in the timeout structure (the wheel drops completed requests at once;
the heap keeps them until their deadline).

Baseline: :class:`HeapPurgatory` below, the same watcher lists with a heapq
timer and a reaper thread (lazy deletion, like Kafka's pre-0.9 DelayQueue).

Goal (issue 3): 50,000 requests/s on one core with about 90% completing early.
The default latency distribution (pct50 2 ms, pct75 6.7 ms, timeout 20 ms)
makes 90% complete early; ``--sweep`` adds longer timeouts with the same 90%.

Run: ``python bench/bench_purgatory.py`` (about a minute), ``--quick`` (a few
seconds).  Prints a Markdown table of medians over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Hashable, Iterable
from typing import Any, Callable

import tickwheel
from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

Z75 = 0.6744897501960817  # 75th percentile of N(0, 1)
Z90 = 1.2815515655446004  # 90th percentile of N(0, 1)


# -- workload ------------------------------------------------------------------
class Workload:
    """Pre-drawn arrivals, latencies and keys, so both purgatories see the same run."""

    def __init__(
        self,
        num: int,
        rate: float,
        timeout_ms: int,
        pct50: float,
        pct75: float,
        keys: int,
        key_space: int,
        seed: int,
    ) -> None:
        rnd = random.Random(seed)
        mu = math.log(pct50)
        sigma = (math.log(pct75) - mu) / Z75
        t = 0.0
        self.arrivals_s: list[float] = []
        for _ in range(num):
            t += rnd.expovariate(rate)
            self.arrivals_s.append(t)
        self.latencies_ms = [math.exp(rnd.gauss(mu, sigma)) for _ in range(num)]
        names = [f"fakeKey{i}" for i in range(key_space)]
        self.keys = [tuple(rnd.sample(names, keys)) for _ in range(num)]
        self.num = num
        self.rate = rate
        self.timeout_ms = timeout_ms
        self.early = sum(1 for x in self.latencies_ms if x < timeout_ms)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- tickwheel purgatory -------------------------------------------------------
class FakeOperation(DelayedOperation):
    """Completable once its completion event fires (Kafka's FakeOperation)."""

    __slots__ = ("completable", "done_event", "keys")

    def __init__(
        self, timeout_ms: int, keys: tuple[str, ...], done: Callable[[bool], None]
    ):
        super().__init__(timeout_ms)
        self.completable = False
        self.keys = keys
        self.done_event = done

    def try_complete(self) -> bool:
        return self.completable and self.force_complete()

    def on_complete(self) -> None:
        self.done_event(self.expired)


# -- heapq baseline ------------------------------------------------------------
class HeapOperation:
    """The same operation for the heap purgatory: a lock, a flag, a deadline."""

    __slots__ = ("lock", "completed", "completable", "keys", "done_event", "deadline")

    def __init__(
        self, timeout_ms: int, keys: tuple[str, ...], done: Callable[[bool], None]
    ):
        self.lock = threading.Lock()
        self.completed = False
        self.completable = False
        self.keys = keys
        self.done_event = done
        self.deadline = time.monotonic() + timeout_ms / 1000

    def try_complete(self) -> bool:
        return self.completable and self.force_complete()

    def force_complete(self, expired: bool = False) -> bool:
        # Called with the lock held (from try_complete) or from the reaper.
        if self.completed:
            return False
        self.completed = True  # stays in the heap until its deadline (lazy deletion)
        self.done_event(expired)
        return True


class HeapPurgatory:
    """Watcher lists + a heapq timer and reaper; completed ops stay in the heap."""

    def __init__(self, purge_interval: int = 1000) -> None:
        self.watchers: dict[Hashable, list[HeapOperation]] = {}
        self.wlock = threading.Lock()
        self.heap: list[tuple[float, int, HeapOperation]] = []
        self.seq = 0
        self.cond = threading.Condition(threading.Lock())
        self.stopping = False
        self.purge_interval = purge_interval
        self.added_since_purge = 0
        self.max_heap = 0
        self.reaper = threading.Thread(
            target=self._reap, name="heap-reaper", daemon=True
        )
        self.reaper.start()

    def try_complete_else_watch(
        self, op: HeapOperation, keys: Iterable[Hashable]
    ) -> bool:
        with op.lock:
            if op.try_complete():
                return True
            with self.wlock:
                for key in keys:
                    lst = self.watchers.get(key)
                    if lst is None:
                        self.watchers[key] = [op]
                    else:
                        lst.append(op)
            if op.try_complete():
                return True
        with self.cond:
            self.seq += 1
            heapq.heappush(self.heap, (op.deadline, self.seq, op))
            if self.heap[0][2] is op:
                self.cond.notify()
            if len(self.heap) > self.max_heap:
                self.max_heap = len(self.heap)
        # The heap cannot tell completed from pending, so purge on a plain count.
        self.added_since_purge += 1
        if self.added_since_purge > self.purge_interval:
            self.added_since_purge = 0
            self.purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        ops = self.watchers.get(key)
        if ops is None:
            return 0
        n = 0
        stale = False
        for op in ops:
            if op.completed:
                stale = True
                continue
            with op.lock:
                if op.try_complete():
                    n += 1
        if stale or n:
            with self.wlock:
                cur = self.watchers.get(key)
                if cur is not None:
                    keep = [o for o in cur if not o.completed]
                    if keep:
                        self.watchers[key] = keep
                    else:
                        del self.watchers[key]
        return n

    def purge(self) -> None:
        with self.wlock:
            for key, ops in list(self.watchers.items()):
                keep = [o for o in ops if not o.completed]
                if keep:
                    self.watchers[key] = keep
                else:
                    del self.watchers[key]

    def _reap(self) -> None:
        heap = self.heap
        while True:
            with self.cond:
                while not self.stopping:
                    wait = heap[0][0] - time.monotonic() if heap else None
                    if wait is not None and wait <= 0:
                        break
                    self.cond.wait(wait)
                if self.stopping:
                    return
                now = time.monotonic()
                due = []
                while heap and heap[0][0] <= now:
                    due.append(heapq.heappop(heap)[2])
            for op in due:
                if not op.completed:
                    with op.lock:
                        op.force_complete(True)

    @property
    def pending(self) -> int:
        return len(self.heap)

    def shutdown(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.reaper.join()


# -- driver --------------------------------------------------------------------
def run_once(kind: str, w: Workload) -> dict[str, float]:
    all_done = threading.Event()
    num = w.num
    outcomes = [0, 0]  # [completed early, expired]
    count_lock = threading.Lock()

    def done(expired: bool) -> None:
        # Runs on the driver thread (events) and on the timer's thread (expiry).
        with count_lock:
            outcomes[expired] += 1
            if outcomes[0] + outcomes[1] >= num:
                all_done.set()

    purgatory: Any
    if kind == "tickwheel":
        purgatory = DelayedOperationPurgatory("bench", None)
        make: Callable[..., Any] = FakeOperation
    else:
        purgatory = HeapPurgatory()
        make = HeapOperation

    def backlog() -> int:
        # Entries in the timeout structure: the wheel's pending count, or the heap.
        return int(purgatory.delayed if kind == "tickwheel" else purgatory.pending)

    gc.collect()
    rss0 = rss_bytes()
    rss_peak = rss0
    max_backlog = 0
    completions: list[tuple[float, int, Any]] = []
    timeout_ms = w.timeout_ms
    submit = purgatory.try_complete_else_watch
    check = purgatory.check_and_complete
    arrivals, latencies, keys = w.arrivals_s, w.latencies_ms, w.keys
    heappush, heappop = heapq.heappush, heapq.heappop
    monotonic = time.monotonic

    cpu0 = time.process_time()
    start = monotonic()
    for i in range(num):
        due_at = start + arrivals[i]
        now = monotonic()
        # Completion events due by now (Kafka's CompletionQueue).
        while completions and completions[0][0] <= now:
            _, _, op = heappop(completions)
            op.completable = True
            check(op.keys[0])
        if due_at - now > 0.001:
            time.sleep(due_at - now)
        latency = latencies[i]
        op = make(timeout_ms, keys[i], done)
        if latency < timeout_ms:
            heappush(completions, (due_at + latency / 1000, i, op))
        submit(op, op.keys)
        if i & 4095 == 0:
            rss_peak = max(rss_peak, rss_bytes())
            max_backlog = max(max_backlog, backlog())
    end = monotonic()
    while completions:
        at, _, op = heappop(completions)
        delay = at - monotonic()
        if delay > 0:
            time.sleep(delay)
        op.completable = True
        check(op.keys[0])
    finished = all_done.wait(timeout_ms / 1000 + 10)
    cpu = time.process_time() - cpu0
    rss_peak = max(rss_peak, rss_bytes())
    if kind == "heapq":
        max_backlog = max(max_backlog, purgatory.max_heap)
    purgatory.shutdown()
    if not finished:
        raise RuntimeError(f"{kind}: only {sum(outcomes)} of {num} requests completed")
    if sum(outcomes) != num:
        raise RuntimeError(f"{kind}: {sum(outcomes)} completions for {num} requests")
    return {
        "target": num / arrivals[-1],
        "achieved": num / (end - start),
        "cpu_s": cpu,
        "cpu_us": cpu / num * 1e6,
        "early": outcomes[0] / num,
        "rss_mb": (rss_peak - rss0) / 2**20,
        "backlog": max_backlog,
    }


def git_sha() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=os.path.dirname(os.path.abspath(__file__)),
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one short run per purgatory")
    ap.add_argument("--rate", type=float, default=50_000.0, help="target requests/s")
    ap.add_argument("--seconds", type=float, default=4.0, help="length of a run")
    ap.add_argument("--timeout-ms", type=int, default=20)
    ap.add_argument("--pct50", type=float, default=2.0)
    ap.add_argument(
        "--pct75",
        type=float,
        default=None,
        help="default: the value that makes 90%% complete early",
    )
    ap.add_argument("--keys", type=int, default=3)
    ap.add_argument("--key-space", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--sweep",
        action="store_true",
        help="also timeouts of 100 and 500 ms (pct50 scaled, 90%% early)",
    )
    ap.add_argument("--impl", choices=["both", "tickwheel", "heapq"], default="both")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds = min(args.seconds, 1.0)
        args.repeat = 1
        args.sweep = False

    def pct75_for(pct50: float, timeout_ms: float) -> float:
        sigma = math.log(timeout_ms / pct50) / Z90
        return pct50 * math.exp(Z75 * sigma)

    configs = [
        (
            args.timeout_ms,
            args.pct50,
            args.pct75 or pct75_for(args.pct50, args.timeout_ms),
        )
    ]
    if args.sweep:
        for t in (100, 500):
            p50 = args.pct50 * t / args.timeout_ms
            configs.append((t, p50, pct75_for(p50, t)))
    kinds = ["tickwheel", "heapq"] if args.impl == "both" else [args.impl]

    print(
        f"# purgatory benchmark: {platform.python_implementation()} "
        f"{platform.python_version()}, tickwheel {tickwheel.__version__} "
        f"({'Cython core' if tickwheel.USE_EXTENSIONS else 'pure Python'}), "
        f"commit {git_sha()}, {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(
        f"# {args.keys} keys/request from {args.key_space}; "
        f"medians of {args.repeat} run(s) of "
        f"{args.seconds:g} s; goal: 50,000 req/s on one core, ~90% early\n"
    )
    print(
        "| purgatory | timeout ms | pct50/pct75 ms | target req/s | achieved req/s "
        "| CPU s | CPU µs/req | early | peak RSS growth MB | max timer backlog |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for timeout_ms, p50, p75 in configs:
        num = max(1000, int(args.rate * args.seconds))
        w = Workload(
            num, args.rate, timeout_ms, p50, p75, args.keys, args.key_space, args.seed
        )
        for kind in kinds:
            runs = [run_once(kind, w) for _ in range(args.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(
                f"| {kind} | {timeout_ms} | {p50:g}/{p75:.3g} | {med['target']:,.0f} "
                f"| {med['achieved']:,.0f} | {med['cpu_s']:.2f} | {med['cpu_us']:.1f} "
                f"| {med['early']:.1%} | {med['rss_mb']:.1f} | {med['backlog']:,.0f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
