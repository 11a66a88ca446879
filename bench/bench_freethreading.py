"""Free-threaded scaling: 2 threads against 1 thread doing the same work.

Run on a free-threaded CPython with the GIL off (one command)::

    PYTHON_GIL=0 python3.13t bench/bench_freethreading.py
    # plus the single-thread cost of the t build against the GIL build:
    PYTHON_GIL=0 python3.13t bench/bench_freethreading.py \\
        --compare /opt/cpython/3.13.15/bin/python3.13

Workloads (each thread does ``--n`` operations; "1 thread" does both
threads' work one after the other, on the same objects):

* ``two_timers``: schedule + cancel on its own MockTimer (a task made and
  cancelled per operation, 10 pending in a sliding window) — threads never
  share a lock, so this is the ceiling;
* ``shared_timer``: the same churn, both threads on ONE SystemTimer (no
  reaper: the deadlines are 60 s away, nothing fires): every add and cancel
  takes the timer's lock;
* ``purgatory``: ``callgrind_purgatory.py``'s request (``bench_purgatory``'s
  early-completion path): watch an operation under one key, complete the
  request made 64 earlier with ``check_and_complete``; each thread has its
  own 64 keys (disjoint) on one purgatory with one timer.  A key is a
  (thread, partition) pair, as Kafka's are TopicPartitions: with int keys
  base + k, both threads' k-th keys would fall in the same one of the 64
  shards (``hash(k) & 63``) at the same step, a lockstep collision that no
  real key set has.

Rounds interleave the 1-thread and 2-thread runs; medians are reported,
with ``speedup = t(1 thread) / t(2 threads)`` and the 1-minute load average
(the machine's other work shows there).  ``--compare PY`` runs each
workload's single-thread round in this interpreter and in ``PY`` (its own
process, interleaved; ``PY`` must import tickwheel, e.g. a venv's python)
and reports ``t(this) / t(PY)``.  Figures: docs/freethreading.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import tickwheel
from tickwheel import MockTimer, SystemTimer, _impl
from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

WINDOW = 10
KEYS = 64


def _noop() -> None:
    pass


def churn(timer: Any, n: int) -> None:
    """Schedule a task and cancel the one made WINDOW operations earlier."""
    window: list[Any] = [timer.schedule(60_000, _noop) for _ in range(WINDOW)]
    schedule = timer.schedule
    for i in range(n):
        task = schedule(60_000 + (i & 63), _noop)
        j = i % WINDOW
        window[j].cancel()
        window[j] = task
    for task in window:
        task.cancel()


class Op(DelayedOperation):
    """Completable once marked (callgrind_purgatory.Op's shape)."""

    __slots__ = ("completable",)

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(timeout_ms)
        self.completable = False

    def try_complete(self) -> bool:
        if self.completable:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass


def requests(purg: Any, n: int, thread: int) -> None:
    """``n`` requests on the keys (thread, 0) .. (thread, KEYS - 1)."""
    keys = [(thread, k) for k in range(KEYS)]
    ring: list[Any] = [None] * KEYS
    watch = purg.try_complete_else_watch
    check = purg.check_and_complete
    for i in range(n):
        k = i % KEYS
        old = ring[k]
        if old is not None:
            old.completable = True
            check(keys[k])
        op = Op(60_000)
        watch(op, (keys[k],))
        ring[k] = op
    for k, op in enumerate(ring):
        if op is not None:
            op.completable = True
            check(keys[k])


def _threads(jobs: list[Callable[[], None]]) -> float:
    barrier = threading.Barrier(len(jobs) + 1)

    def run(job: Callable[[], None]) -> None:
        barrier.wait()
        job()

    threads = [threading.Thread(target=run, args=(j,)) for j in jobs]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def workload(name: str, n: int) -> tuple[list[Callable[[], None]], Callable[[], None]]:
    """(two jobs, cleanup) for one round of ``name``."""
    if name == "two_timers":
        a, b = MockTimer(), MockTimer()
        workers = [lambda: churn(a, n), lambda: churn(b, n)]
        return workers, lambda: (a.close(), b.close())
    if name == "shared_timer":
        t = SystemTimer("bench-ft", reaper=False)
        return [lambda: churn(t, n), lambda: churn(t, n)], t.close
    if name == "purgatory":
        timer = SystemTimer("bench-ft", reaper=False)
        purg = DelayedOperationPurgatory("bench-ft", timer, reaper=False)

        def done() -> None:
            purg.shutdown()
            timer.close()

        return [lambda: requests(purg, n, 0), lambda: requests(purg, n, 1)], done
    raise ValueError(f"workload must be one of {WORKLOADS}, got {name!r}")


WORKLOADS = ("two_timers", "shared_timer", "purgatory")


def one_round(name: str, n: int, threads: int) -> float:
    jobs, cleanup = workload(name, n)
    try:
        if threads == 1:
            return _threads([lambda: [job() for job in jobs]])
        return _threads(jobs)
    finally:
        cleanup()


def gil_state() -> str:
    enabled = getattr(sys, "_is_gil_enabled", lambda: True)()
    return "GIL on" if enabled else "GIL off"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="operations per thread")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", choices=WORKLOADS, action="append")
    ap.add_argument(
        "--compare", metavar="PY", help="another interpreter, single-thread"
    )
    ap.add_argument("--one", nargs=2, metavar=("WORKLOAD", "THREADS"),
                    help=argparse.SUPPRESS)  # a single round, for --compare
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_round(args.one[0], args.n, int(args.one[1]))))
        return 0
    names = args.only or list(WORKLOADS)
    print(f"# {sys.version.split()[0]} {sys.implementation.cache_tag} {gil_state()}, "
          f"USE_EXTENSIONS={_impl.USE_EXTENSIONS}, tickwheel {tickwheel.__version__}, "
          f"{os.cpu_count()} CPUs, n={args.n}/thread, {args.rounds} rounds")
    print("| workload | 1 thread (s) | 2 threads (s) | speedup | load avg |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        one_t, two_t, loads = [], [], []
        for _ in range(args.rounds):
            one_t.append(one_round(name, args.n, 1))
            two_t.append(one_round(name, args.n, 2))
            loads.append(os.getloadavg()[0])
        a, b = statistics.median(one_t), statistics.median(two_t)
        print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f}x | "
              f"{statistics.median(loads):.1f} |", flush=True)
    if args.compare:
        here = sys.executable
        print(f"\nSingle thread, {here} vs {args.compare} (same work, own processes):")
        print("| workload | this (s) | other (s) | this / other |")
        print("|---|---:|---:|---:|")
        me = os.path.abspath(__file__)
        for name in names:
            mine, other = [], []
            for _ in range(args.rounds):
                for py, out in ((here, mine), (args.compare, other)):
                    env = dict(os.environ)
                    if py != here:  # a GIL build refuses PYTHON_GIL=0
                        env.pop("PYTHON_GIL", None)
                    res = subprocess.run(
                        [py, me, "--n", str(args.n), "--one", name, "1"],
                        check=True, capture_output=True, text=True, env=env,
                    )
                    out.append(float(res.stdout.strip().splitlines()[-1]))
            a, b = statistics.median(mine), statistics.median(other)
            print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
