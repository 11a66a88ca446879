"""Concurrency stress: many threads add, cancel and re-add while the reaper fires.

Why: a timer under a server's request handling must never lose a task, run
one twice, or run one early, whatever the interleaving.  This drives a real
:class:`~tickwheel.SystemTimer` (reaper thread, real clock) and a
:class:`~tickwheel.DelayedOperationPurgatory` from ``threads`` threads at once
and then accounts for every task.

Timer workload, per thread, ``ops`` random operations on its own tasks:

* schedule a *short* task (0-20 ms, ints and floats, some already due);
* schedule a *long* task (60 s: certainly still pending during the run);
* cancel one of its tasks (any state: True means it must never run);
* re-add (move) a long task, to a short or another long deadline.

Accounting (after the threads finish and every short task is due):

* a task whose ``cancel()`` returned True ran 0 times;
* every other task ran exactly once (``lost`` counts 0 runs, ``duplicates``
  counts more than one), and never before the deadline computed from a
  clock read taken just before the add (``early``);
* the long tasks still pending are cancelled, and ``len(timer)`` is then 0.

Purgatory workload, per thread: submit operations under 1-3 of 64 keys with
a short or a long timeout, mark random operations ready and call
``check_and_complete`` on one of their keys, ``force_complete`` some, and
withdraw a key now and then (``cancel_for_key``).  Every operation must end
exactly one way (completed once, or withdrawn), no timeout may fire early,
and a long operation marked ready and then checked must be completed (no lost
wake-up).  At the end ``delayed == watched == 0``.

A watchdog (``faulthandler.dump_traceback_later``) dumps every thread's stack
if a run takes longer than its bound, and the run then fails.

Usage (the figures in docs/reliability.md come from the full run)::

    python tests/reliability/stress.py         # 8 threads x 100,000 ops, both cores
    python tests/reliability/stress.py --threads 8 --ops 3000 --core pure

``tests/test_stress.py`` runs the same code at CI size.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import random
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

_monotonic_ns = time.monotonic_ns
LONG_MS = 60_000


class StressFailure(AssertionError):
    """The stress run found a lost, duplicated or early task, or hung."""


def _core(core: str) -> tuple[Any, Any, Any, Any]:
    """(SystemTimer, TimerTask, DelayedOperation, DelayedOperationPurgatory).

    For ``core`` in {"c", "pure"}: ``tickwheel`` itself (the compiled core is
    then required) or its copy built on the twins.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/twins.py
    from twins import twin_package

    import tickwheel

    if core == "pure":
        pkg = twin_package()
    else:
        from tickwheel import _wheel  # noqa: F401  (fails loudly without a build)

        pkg = tickwheel
    purgatory = pkg.purgatory
    return (
        pkg.SystemTimer,
        pkg.TimerTask,
        purgatory.DelayedOperation,
        purgatory.DelayedOperationPurgatory,
    )


def _watchdog(threads: list[threading.Thread], limit_s: float, what: str) -> None:
    """Join ``threads`` within ``limit_s``; dump all stacks and fail otherwise."""
    faulthandler.dump_traceback_later(limit_s, exit=False)
    try:
        deadline = time.monotonic() + limit_s + 1.0
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in threads if t.is_alive()]
        if alive:
            raise StressFailure(
                f"{what}: threads still running after {limit_s}s: {alive}"
            )
    finally:
        faulthandler.cancel_dump_traceback_later()


def _wait_until(pred: Callable[[], bool], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not pred():
        if time.monotonic() > deadline:
            faulthandler.dump_traceback(all_threads=True)
            raise StressFailure(f"{what} did not happen within {limit_s}s")
        time.sleep(0.002)


# -- timer ----------------------------------------------------------------------------
def run_timer_stress(
    core: str = "c",
    threads: int = 8,
    ops: int = 100_000,
    executor: str = "default",
    seed: int = 1,
    limit_s: float = 600.0,
) -> dict[str, Any]:
    """Run the timer workload; return its figures or raise StressFailure."""
    SystemTimer, TimerTask, _, _ = _core(core)

    class Task(TimerTask):
        __slots__ = ("runs", "deadline_ns", "fired_ns", "cancel_ok", "long")

        def run(self) -> None:
            now = _monotonic_ns()
            self.runs += 1
            self.fired_ns = now

    def new_task(delay: float, long: bool) -> Any:
        task = Task(delay)
        task.runs = 0
        task.fired_ns = 0
        task.cancel_ok = False
        task.long = long
        return task

    pool = None
    if executor == "pool":
        pool = ThreadPoolExecutor(4, thread_name_prefix="stress-run")
        ex: Any = pool
    elif executor == "inline":
        ex = "inline"
    else:
        ex = None
    timer = SystemTimer(name=f"stress-{core}", executor=ex)
    per_thread: list[list[Any]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []
    counts = {"schedule": 0, "cancel": 0, "move": 0}

    def worker(index: int) -> None:
        rnd = random.Random(seed * 1000 + index)
        mine = per_thread[index]
        longs: list[Any] = []  # long tasks not yet moved or cancelled
        n_sched = n_cancel = n_move = 0
        try:
            for _ in range(ops):
                r = rnd.random()
                if r < 0.40 or not mine:
                    delay: float = rnd.choice((rnd.randint(-2, 20), rnd.random() * 20))
                    task = new_task(delay, False)
                    task.deadline_ns = _monotonic_ns() + int(delay * 1_000_000)
                    timer.add(task)
                    mine.append(task)
                    n_sched += 1
                elif r < 0.55:
                    task = new_task(LONG_MS, True)
                    task.deadline_ns = _monotonic_ns() + LONG_MS * 1_000_000
                    timer.add(task)
                    mine.append(task)
                    longs.append(task)
                    n_sched += 1
                elif r < 0.75:
                    task = mine[rnd.randrange(len(mine))]
                    if task.cancel():
                        if task.cancel_ok:
                            raise StressFailure(f"{task!r} cancelled twice")
                        task.cancel_ok = True  # dropped from ``longs`` lazily
                    n_cancel += 1
                elif longs:
                    # Move a long task (certainly pending: due in 60 s).
                    i = rnd.randrange(len(longs))
                    task = longs[i]
                    longs[i] = longs[-1]
                    longs.pop()
                    if task.cancel_ok:
                        continue
                    if rnd.random() < 0.7:
                        delay = rnd.choice((rnd.randint(0, 20), rnd.random() * 20))
                        task.long = False
                    else:
                        delay = LONG_MS + rnd.randint(1, 1000)
                        longs.append(task)
                    task.delay_ms = delay
                    task.deadline_ns = _monotonic_ns() + int(delay * 1_000_000)
                    timer.add(task)
                    n_move += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        with lock:
            counts["schedule"] += n_sched
            counts["cancel"] += n_cancel
            counts["move"] += n_move

    lock = threading.Lock()
    workers = [
        threading.Thread(target=worker, args=(i,), name=f"stress-worker-{i}")
        for i in range(threads)
    ]
    start = time.perf_counter()
    try:
        for t in workers:
            t.start()
        _watchdog(workers, limit_s, "timer stress")
        if errors:
            raise errors[0]
        tasks = [task for mine in per_thread for task in mine]
        n_long = sum(1 for t in tasks if t.long and not t.cancel_ok)
        # Every short task is due within ~20 ms of the last add: wait for them.
        _wait_until(
            lambda: len(timer) == n_long, 60.0, f"draining to {n_long} long tasks"
        )
        _wait_until(
            lambda: all(t.runs or t.cancel_ok or t.long for t in tasks),
            60.0,
            "every short task running",
        )
        elapsed = time.perf_counter() - start
        cancelled_at_end = 0
        for task in tasks:
            if task.long and not task.cancel_ok:
                if not task.cancel():
                    raise StressFailure(
                        f"long task {task!r} was not pending at the end"
                    )
                task.cancel_ok = True
                cancelled_at_end += 1
        timer._check()
        remaining = len(timer)
    finally:
        timer.close()
        if pool is not None:
            pool.shutdown(wait=True)
    lost = sum(1 for t in tasks if not t.cancel_ok and t.runs == 0)
    dup = sum(1 for t in tasks if t.runs > 1)
    ran_after_cancel = sum(1 for t in tasks if t.cancel_ok and t.runs)
    early = sum(1 for t in tasks if t.runs and t.fired_ns < t.deadline_ns)
    late_ms = sorted(
        (t.fired_ns - t.deadline_ns) / 1e6 for t in tasks if t.runs and not t.cancel_ok
    )
    figures = {
        "workload": "timer",
        "core": core,
        "executor": executor,
        "threads": threads,
        "ops": threads * ops,
        "tasks": len(tasks),
        "scheduled": counts["schedule"],
        "cancel_calls": counts["cancel"],
        "moves": counts["move"],
        "ran": sum(t.runs for t in tasks),
        "cancelled": sum(1 for t in tasks if t.cancel_ok),
        "cancelled_at_end": cancelled_at_end,
        "lost": lost,
        "duplicates": dup,
        "ran_after_cancel": ran_after_cancel,
        "early": early,
        "len_after": remaining,
        "late_ms_p50": round(late_ms[len(late_ms) // 2], 2) if late_ms else None,
        "late_ms_p99": round(late_ms[int(len(late_ms) * 0.99)], 2) if late_ms else None,
        "late_ms_max": round(late_ms[-1], 2) if late_ms else None,
        "seconds": round(elapsed, 2),
    }
    if lost or dup or ran_after_cancel or early or remaining:
        raise StressFailure(f"timer stress failed: {figures}")
    return figures


# -- purgatory -------------------------------------------------------------------------
def run_purgatory_stress(
    core: str = "c",
    threads: int = 8,
    ops: int = 100_000,
    seed: int = 2,
    limit_s: float = 600.0,
    n_keys: int = 64,
) -> dict[str, Any]:
    """Run the purgatory workload; return its figures or raise StressFailure."""

    SystemTimer, _, DelayedOperation, DelayedOperationPurgatory = _core(core)

    class Op(DelayedOperation):
        __slots__ = (
            "ready",
            "keys",
            "deadline_ns",
            "completions",
            "expirations",
            "expired_at_ns",
            "checked_after_ready",
            "long",
        )

        def try_complete(self) -> bool:
            return self.ready and self.force_complete()

        def on_complete(self) -> None:
            self.completions += 1

        def on_expiration(self) -> None:
            self.expirations += 1
            self.expired_at_ns = _monotonic_ns()

    timer = SystemTimer(name=f"stress-purgatory-{core}")
    purgatory = DelayedOperationPurgatory("stress", timer, purge_interval=1000)
    keys = [f"k{i}" for i in range(n_keys)]
    per_thread: list[list[Any]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        rnd = random.Random(seed * 1000 + index)
        mine = per_thread[index]
        try:
            for _ in range(ops):
                r = rnd.random()
                if r < 0.45 or not mine:
                    long = rnd.random() < 0.5
                    delay = LONG_MS if long else rnd.randint(0, 30)
                    op = Op(delay)
                    op.ready = False
                    op.completions = op.expirations = 0
                    op.expired_at_ns = 0
                    op.checked_after_ready = False
                    op.long = long
                    op.keys = rnd.sample(keys, rnd.randint(1, 3))
                    op.deadline_ns = _monotonic_ns() + delay * 1_000_000
                    mine.append(op)
                    purgatory.try_complete_else_watch(op, op.keys)
                elif r < 0.85:
                    # An event: some operation became completable; tell one key.
                    op = mine[rnd.randrange(len(mine))]
                    op.ready = True
                    purgatory.check_and_complete(rnd.choice(op.keys))
                    op.checked_after_ready = True
                elif r < 0.99:
                    mine[rnd.randrange(len(mine))].force_complete()
                else:
                    purgatory.cancel_for_key(rnd.choice(keys))
        except BaseException as exc:
            errors.append(exc)

    workers = [
        threading.Thread(target=worker, args=(i,), name=f"stress-purgatory-{i}")
        for i in range(threads)
    ]
    start = time.perf_counter()
    try:
        for t in workers:
            t.start()
        _watchdog(workers, limit_s, "purgatory stress")
        if errors:
            raise errors[0]
        ops_all = [op for mine in per_thread for op in mine]
        # No lost wake-up: ready + checked afterwards => completed by now,
        # unless the operation was withdrawn or had already timed out.
        lost_wakeups = sum(
            1
            for op in ops_all
            if op.checked_after_ready and not op.completed and not op.withdrawn
        )
        n_long_open = sum(1 for op in ops_all if op.long and not op._op_done)
        _wait_until(
            lambda: len(timer) == n_long_open, 60.0, "short operations timing out"
        )
        _wait_until(
            lambda: all(op.long or op._op_done for op in ops_all),
            60.0,
            "every short operation finishing",
        )
        elapsed = time.perf_counter() - start
        # Complete the long ones through their keys, as events would.
        for op in ops_all:
            if not op._op_done:
                op.ready = True
        for key in keys:
            purgatory.check_and_complete(key)
        purgatory.purge()
        watched, delayed = purgatory.watched, purgatory.delayed
        purgatory._check()
        timer._check()
    finally:
        purgatory.shutdown()
        timer.close()
    withdrawn = sum(1 for op in ops_all if op.withdrawn)
    never = sum(1 for op in ops_all if op.completions == 0 and not op.withdrawn)
    dup = sum(1 for op in ops_all if op.completions > 1 or op.expirations > 1)
    both = sum(1 for op in ops_all if op.withdrawn and op.completions)
    early = sum(
        1 for op in ops_all if op.expirations and op.expired_at_ns < op.deadline_ns
    )
    figures = {
        "workload": "purgatory",
        "core": core,
        "threads": threads,
        "ops": threads * ops,
        "operations": len(ops_all),
        "completed": sum(1 for op in ops_all if op.completed and not op.expired),
        "expired": sum(1 for op in ops_all if op.expired),
        "withdrawn": withdrawn,
        "lost": never,
        "lost_wakeups": lost_wakeups,
        "duplicates": dup + both,
        "early": early,
        "watched_after": watched,
        "delayed_after": delayed,
        "seconds": round(elapsed, 2),
    }
    if never or lost_wakeups or dup or both or early or watched or delayed:
        raise StressFailure(f"purgatory stress failed: {figures}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument(
        "--ops", type=int, default=100_000, help="operations per thread"
    )
    parser.add_argument("--core", choices=["c", "pure", "both"], default="both")
    parser.add_argument(
        "--executor", choices=["default", "inline", "pool", "all"], default="default"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit-s", type=float, default=1800.0, help="watchdog bound")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    cores = ["c", "pure"] if args.core == "both" else [args.core]
    executors = (
        ["default", "inline", "pool"] if args.executor == "all" else [args.executor]
    )
    results = []
    for core in cores:
        for ex in executors:
            fig = run_timer_stress(
                core, args.threads, args.ops, ex, args.seed, args.limit_s
            )
            print(json.dumps(fig), flush=True)
            results.append(fig)
        fig = run_purgatory_stress(
            core, args.threads, args.ops, args.seed, args.limit_s
        )
        print(json.dumps(fig), flush=True)
        results.append(fig)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"python": sys.version.split()[0], "results": results}, f, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
