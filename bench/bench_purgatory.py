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

A request becomes completable ``latency`` after it was actually submitted
(Kafka's ``completesAt = now + latency``); timing it from the *scheduled*
arrival, as an earlier version did, shortened the work of a driver that fell
behind.  The driver's own cost (pacing, operation objects, completion queue)
is the ``generator`` row (``--impl all``); completions are counted without a
lock so the bookkeeping costs every purgatory the same.

Every purgatory (tickwheel with its compiled CountdownOperation, tickwheel
with a Python DelayedOperation subclass, the heapq baseline) runs the same
driver in one process, their repeats
interleaved: arrivals and completion events on the main thread, expirations
on the timer's threads.  Reported per
run: the target rate (requests / last scheduled arrival), the achieved rate
(requests / time to submit them all; it falls below the target when the
purgatory cannot keep up), process CPU time (all threads) and CPU per request,
the share completed early and expired, the peak RSS growth, and the largest
backlog in the timeout structure (the wheel drops completed requests at once;
the heap keeps them until their deadline).

Baseline: :class:`HeapPurgatory` below, the same watcher lists with a heapq
timer and a reaper thread (lazy deletion, like Kafka's pre-0.9 DelayQueue).

Goal: 50,000 requests/s on one core with about 90% completing early.
The default latency distribution (pct50 2 ms, pct75 6.7 ms, timeout 20 ms)
makes 90% complete early; ``--sweep`` adds longer timeouts with the same 90%.

Run: ``python bench/bench_purgatory.py`` (about a minute), ``--quick`` (a few
seconds).  Prints a Markdown table of medians over ``--repeat`` runs, with the
main thread's CPU and the run-queue wait (CPU taken by other processes, from
/proc schedstat) beside the achieved rate.  ``--soak 40`` drives each
purgatory for 40 s and samples RSS and ``sys.getallocatedblocks()``
(``--tracemalloc`` adds traced memory) to show memory staying flat.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import itertools
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import tickwheel
from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

try:
    from tickwheel.purgatory import CountdownOperation
except ImportError:  # a tickwheel before it: A/B runs drive older trees too
    CountdownOperation = None  # type: ignore[assignment,misc]

# The purgatories run_once drives: tickwheel's with its compiled operation
# (CountdownOperation), with a Python DelayedOperation subclass, the heapq
# baseline, and the driver alone.
KINDS = ("tickwheel", "tickwheel-subclass", "heapq", "generator")

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
        self.cond_lock = threading.Lock()
        self.cond = threading.Condition(self.cond_lock)
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
        lock = op.lock
        lock.acquire()
        try:
            if op.try_complete():
                return True
            wlock = self.wlock
            wlock.acquire()
            try:
                for key in keys:
                    lst = self.watchers.get(key)
                    if lst is None:
                        self.watchers[key] = [op]
                    else:
                        lst.append(op)
            finally:
                wlock.release()
            if op.try_complete():
                return True
        finally:
            lock.release()
        heap = self.heap
        cond_lock = self.cond_lock
        cond_lock.acquire()
        try:
            self.seq += 1
            heapq.heappush(heap, (op.deadline, self.seq, op))
            if heap[0][2] is op:
                self.cond.notify()
            if len(heap) > self.max_heap:
                self.max_heap = len(heap)
        finally:
            cond_lock.release()
        # The heap cannot tell completed from pending, so purge on a plain count.
        self.added_since_purge += 1
        if self.added_since_purge > self.purge_interval:
            self.added_since_purge = 0
            self.purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        # The same one-pass scan as tickwheel's (lock calls without ``with``,
        # live operations collected on the way, the list replaced, not edited),
        # so the two differ in the timeout structure, not in the watcher lists.
        ops = self.watchers.get(key)
        if ops is None:
            return 0
        n = 0
        dropped = 0
        keep: list[HeapOperation] = []
        keep_op = keep.append
        for op in ops:
            if op.completed:
                dropped += 1
                continue
            lock = op.lock
            lock.acquire()
            try:
                if op.try_complete():
                    n += 1
                    dropped += 1
                else:
                    keep_op(op)
            finally:
                lock.release()
        if dropped:
            seen = len(keep) + dropped
            with self.wlock:
                cur = self.watchers.get(key)
                if cur is ops:
                    keep.extend(ops[seen:])
                elif cur is not None:
                    keep = [o for o in cur if not o.completed]
                if cur is not None:
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


# -- generator-only reference ---------------------------------------------------
class NullOperation:
    """An operation for :class:`NullPurgatory`: just the fields the driver sets."""

    __slots__ = ("completable", "keys", "done_event")

    def __init__(
        self, timeout_ms: int, keys: tuple[str, ...], done: Callable[[bool], None]
    ):
        self.completable = False
        self.keys = keys
        self.done_event = done


class NullPurgatory:
    """No purgatory at all: the driver's own cost (the ``generator`` row).

    The driver runs exactly as for the real purgatories (pacing, operation
    objects, the completion queue, the calls), but the calls do nothing.
    """

    def __init__(self) -> None:
        self.pending = 0

    def try_complete_else_watch(self, op: NullOperation, keys: Any) -> bool:
        return False

    def check_and_complete(self, key: Hashable) -> int:
        return 0

    def shutdown(self) -> None:
        pass


# -- driver --------------------------------------------------------------------
def sched_ns() -> tuple[int, int]:
    """(on-CPU ns, runnable-but-waiting ns) summed over this process's threads.

    The second number is time the kernel kept our threads off a CPU that
    was busy with other processes: on a shared machine it says how much of
    a shortfall came from the machine rather than from the purgatory.
    """
    run = wait = 0
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    fields = f.read().split()
            except OSError:
                continue  # the thread ended
            run += int(fields[0])
            wait += int(fields[1])
    except OSError:
        pass
    return run, wait


class Counter:
    """Completions counted from several threads without a lock.

    ``next()`` on an ``itertools.count`` is one C call, atomic under the GIL,
    so the driver's bookkeeping costs both purgatories the same small amount.
    """

    def __init__(self) -> None:
        self._counts = (itertools.count(), itertools.count())

    def __call__(self, expired: bool) -> None:
        next(self._counts[expired])

    def op_done(self, op: Any) -> None:
        """A CountdownOperation's callback: count it by ``op.expired``."""
        next(self._counts[op.expired])

    def values(self) -> tuple[int, int]:
        # repr(count) is "count(next_value)": a read without a bump (its
        # __reduce__ warned on 3.12 and is gone in 3.14).
        early, expired = (int(repr(c)[6:-1]) for c in self._counts)
        return early, expired


Sample = dict[str, float]


def run_once(
    kind: str,
    w: Workload,
    cycles: int = 1,
    sample_every_s: float = 0.0,
    samples: list[Sample] | None = None,
    trace: bool = False,
) -> dict[str, float]:
    """Drive one purgatory through ``w`` (``cycles`` times back to back).

    Arrivals follow the pre-drawn schedule; a request that completes early
    becomes completable ``latency`` after it was actually submitted (Kafka's
    ``completesAt = now + latency``), so a driver that falls behind does not
    get shorter-lived requests.  With ``sample_every_s``, RSS, Python's
    allocated blocks (and tracemalloc's traced size with ``trace``) are
    appended to ``samples`` over time.
    """
    num = w.num * cycles
    done = Counter()
    purgatory: Any
    make: Callable[..., Any]
    countdown = kind == "tickwheel"
    if kind == "tickwheel":
        if CountdownOperation is None:
            raise ValueError(
                "this tickwheel has no CountdownOperation: use tickwheel-subclass"
            )
        purgatory = DelayedOperationPurgatory("bench", None)
        make = CountdownOperation
    elif kind == "tickwheel-subclass":
        purgatory = DelayedOperationPurgatory("bench", None)
        make = FakeOperation
    elif kind == "heapq":
        purgatory = HeapPurgatory()
        make = HeapOperation
    elif kind == "generator":
        purgatory = NullPurgatory()
        make = NullOperation
    else:
        raise ValueError(kind)

    def backlog() -> int:
        # Entries in the timeout structure: the wheel's pending count, or the heap.
        if kind.startswith("tickwheel"):
            return int(purgatory.delayed)
        return int(purgatory.pending)

    def watched() -> int:
        if kind.startswith("tickwheel"):
            return int(purgatory.watched)
        if kind == "heapq":
            return sum(map(len, list(purgatory.watchers.values())))
        return 0

    gc.collect()
    if trace:
        tracemalloc.start()
    rss0 = rss_bytes()
    rss_peak = rss0
    max_backlog = 0
    max_lag = 0.0
    completions: list[tuple[float, int, Any]] = []
    timeout_ms = w.timeout_ms
    op_done = done.op_done
    submit = purgatory.try_complete_else_watch
    check = purgatory.check_and_complete
    arrivals, latencies, keys = w.arrivals_s, w.latencies_ms, w.keys
    period = arrivals[-1]
    heappush, heappop = heapq.heappush, heapq.heappop
    monotonic = time.monotonic
    sleep = time.sleep
    n = w.num
    next_sample = 0.0

    sched0 = sched_ns()
    main0 = time.thread_time()
    cpu0 = time.process_time()
    start = monotonic()
    for c in range(cycles):
        base = start + c * period
        for i in range(n):
            due_at = base + arrivals[i]
            now = monotonic()
            # Completion events due by now (Kafka's CompletionQueue).
            while completions and completions[0][0] <= now:
                _, j, op = heappop(completions)
                if countdown:
                    op.count_down()
                else:
                    op.completable = True
                check(keys[j][0])
            if due_at - now > 0.001:
                sleep(due_at - now)
                now = monotonic()
            latency = latencies[i]
            if countdown:
                op = make(timeout_ms, op_done)
            else:
                op = make(timeout_ms, keys[i], done)
            if latency < timeout_ms:
                heappush(completions, (now + latency / 1000, i, op))
            submit(op, keys[i])
            if i & 1023 == 0:
                lag = now - due_at
                if lag > max_lag:
                    max_lag = lag
                if i & 4095 == 0:
                    rss_peak = max(rss_peak, rss_bytes())
                    max_backlog = max(max_backlog, backlog())
                    if samples is not None and now - start >= next_sample:
                        next_sample += sample_every_s
                        early, expired = done.values()
                        samples.append(
                            {
                                "t": now - start,
                                "submitted": c * n + i,
                                "rss_mb": rss_bytes() / 2**20,
                                "blocks": sys.getallocatedblocks(),
                                "traced_mb": tracemalloc.get_traced_memory()[0] / 2**20
                                if trace
                                else 0.0,
                                "watched": watched(),
                                "backlog": backlog(),
                                "open": c * n + i - early - expired,
                            }
                        )
    end = monotonic()
    while completions:
        at, j, op = heappop(completions)
        delay = at - monotonic()
        if delay > 0:
            sleep(delay)
        if countdown:
            op.count_down()
        else:
            op.completable = True
        check(keys[j][0])
    if kind == "generator":
        # Nothing completes or expires there: book the workload's outcomes.
        for k in range(num):
            done(k >= w.early * cycles)
    # The timer's threads finish the rest (expiries) within a timeout.
    wait_until = monotonic() + timeout_ms / 1000 + 10
    while sum(done.values()) < num and monotonic() < wait_until:
        sleep(0.001)
    main_cpu = time.thread_time() - main0
    cpu = time.process_time() - cpu0
    sched1 = sched_ns()
    rss_peak = max(rss_peak, rss_bytes())
    if trace:
        tracemalloc.stop()
    if kind == "heapq":
        max_backlog = max(max_backlog, purgatory.max_heap)
    purgatory.shutdown()
    early, expired = done.values()
    if early + expired != num:
        raise RuntimeError(f"{kind}: {early + expired} completions for {num} requests")
    return {
        "target": num / (period * cycles),
        "achieved": num / (end - start),
        "lag_ms": max_lag * 1000,
        "cpu_s": cpu,
        "cpu_us": cpu / num * 1e6,
        "main_us": main_cpu / num * 1e6,
        "runq_s": (sched1[1] - sched0[1]) / 1e9,
        "early": early / num,
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
    ap.add_argument(
        "--impl",
        choices=["both", "all", *KINDS],
        default="both",
        help="both: tickwheel (its compiled CountdownOperation) and heapq; all: "
        "also tickwheel-subclass (a Python DelayedOperation subclass) and the "
        "generator-only row",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--soak",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="memory run: drive each purgatory this long and print RSS, "
        "allocated blocks and watcher/timer sizes every --sample seconds",
    )
    ap.add_argument("--sample", type=float, default=5.0, help="soak sample period (s)")
    ap.add_argument(
        "--tracemalloc",
        action="store_true",
        help="soak: also sample tracemalloc's traced size (slows the run)",
    )
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
    kinds = {
        "both": ["tickwheel", "heapq"],
        "all": list(KINDS),
    }.get(args.impl, [args.impl])

    print(
        f"# purgatory benchmark: {platform.python_implementation()} "
        f"{platform.python_version()}, tickwheel {tickwheel.__version__} "
        f"({'Cython core' if tickwheel.USE_EXTENSIONS else 'pure Python'}), "
        f"commit {git_sha()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if args.soak:
        return soak(args, configs[0], kinds)
    print(
        f"# {args.keys} keys/request from {args.key_space}; "
        f"medians of {args.repeat} run(s) of {args.seconds:g} s, "
        "purgatories interleaved; goal: 50,000 req/s on one core, ~90% early\n"
        "# CPU µs/req: whole process (all threads); main µs/req: the driver "
        "thread alone; run-queue s: time our threads waited for a CPU taken by "
        "other processes; max lag: how far submissions fell behind schedule\n"
    )
    print(
        "| purgatory | timeout ms | pct50/pct75 ms | target req/s | achieved req/s "
        "| max lag ms | CPU s | CPU µs/req | main µs/req | run-queue s | early "
        "| peak RSS growth MB | max timer backlog |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for timeout_ms, p50, p75 in configs:
        num = max(1000, int(args.rate * args.seconds))
        w = Workload(
            num, args.rate, timeout_ms, p50, p75, args.keys, args.key_space, args.seed
        )
        # Interleaved (A B A B ...), so a burst of load from other processes
        # on a shared machine hits every purgatory alike.
        runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
        for _ in range(args.repeat):
            for kind in kinds:
                runs[kind].append(run_once(kind, w))
        for kind in kinds:
            med = {
                k: statistics.median(r[k] for r in runs[kind]) for k in runs[kind][0]
            }
            print(
                f"| {kind} | {timeout_ms} | {p50:g}/{p75:.3g} | {med['target']:,.0f} "
                f"| {med['achieved']:,.0f} | {med['lag_ms']:,.0f} | {med['cpu_s']:.2f} "
                f"| {med['cpu_us']:.1f} | {med['main_us']:.1f} | {med['runq_s']:.2f} "
                f"| {med['early']:.1%} | {med['rss_mb']:.1f} | {med['backlog']:,.0f} |",
                flush=True,
            )
    return 0


def soak(
    args: argparse.Namespace, config: tuple[int, float, float], kinds: list[str]
) -> int:
    """Long runs that show memory staying flat while completed requests are purged."""
    timeout_ms, p50, p75 = config
    num = max(1000, int(args.rate * args.seconds))
    w = Workload(
        num, args.rate, timeout_ms, p50, p75, args.keys, args.key_space, args.seed
    )
    cycles = max(1, round(args.soak / args.seconds))
    print(
        f"# soak: {num * cycles:,} requests ({cycles} x {args.seconds:g} s of the "
        f"workload), timeout {timeout_ms} ms, pct50/pct75 {p50:g}/{p75:.3g} ms; "
        f"sampled every {args.sample:g} s; blocks = sys.getallocatedblocks()"
        + ("; traced = tracemalloc" if args.tracemalloc else "")
        + "\n"
    )
    for kind in kinds:
        if kind == "generator":
            continue
        samples: list[Sample] = []
        r = run_once(kind, w, cycles, args.sample, samples, args.tracemalloc)
        print(
            f"## {kind}: achieved {r['achieved']:,.0f} req/s, "
            f"CPU {r['cpu_us']:.1f} µs/req, early {r['early']:.1%}\n"
        )
        print(
            "| t s | submitted | open requests | watched entries | timer backlog "
            "| RSS MB | allocated blocks |"
            + (" traced MB |" if args.tracemalloc else "")
        )
        print(
            "|---:|---:|---:|---:|---:|---:|---:|"
            + ("---:|" if args.tracemalloc else "")
        )
        for x in samples:
            print(
                f"| {x['t']:.0f} | {x['submitted']:,.0f} | {x['open']:,.0f} "
                f"| {x['watched']:,.0f} | {x['backlog']:,.0f} | {x['rss_mb']:.1f} "
                f"| {x['blocks']:,.0f} |"
                + (f" {x['traced_mb']:.2f} |" if args.tracemalloc else ""),
                flush=True,
            )
        if len(samples) >= 3:
            tail = samples[len(samples) // 3 :]
            rss = [x["rss_mb"] for x in tail]
            blocks = [x["blocks"] for x in tail]
            print(
                f"\nafter warm-up: RSS {min(rss):.1f}..{max(rss):.1f} MB, "
                f"blocks {min(blocks):,.0f}..{max(blocks):,.0f} while "
                f"{tail[-1]['submitted'] - tail[0]['submitted']:,.0f} more requests "
                "were submitted and purged\n",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
