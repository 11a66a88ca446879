"""Measurements that are not durations of a loop: W3 lateness, W4 memory, W6 GC.

Each measurement runs in a fresh subprocess per implementation, so one
implementation's garbage cannot inflate another's memory numbers::

    python bench/measure.py lateness tickwheel --n 200000
    python bench/measure.py memory heapq --n 1000000
    python bench/measure.py gc asyncio --n 1000000
    python bench/measure.py dispatch pool-per-task --n 200000

prints one JSON object.  ``bench/run.py`` calls these and renders the tables.

W3 (lateness): N timers with absolute deadlines spread over a 500 ms window
that starts far enough ahead (200 ms, or 5 µs per timer) that scheduling
never overlaps firing.  Each delay is computed from ``time.monotonic_ns()``
right before its schedule call, and each callback gets its own deadline and
records ``monotonic_ns() - deadline``.  The deadline is a lower bound of the
timer's own (the clock moves on during the call), so a negative value is a
real early fire, and a positive one may overstate the lateness by the cost
of one schedule call.

W3 stall: the same load on the manual clock, stepped 1 ms at a time: the
longest single poll while tasks fall due (no task runs during a poll), with
and without early cascading.  Noise can make it longer, never shorter.

Dispatch: N due tasks handed by one ``advance_clock`` to a pool (one submit
per task, and one per bucket as before), to the default worker and inline:
the time in the call and until the last task ran (see :func:`dispatch`).

W4 (memory): bytes per pending timer at N (tracemalloc and RSS), with one
shared no-op callback and the handles kept in a list allocated before the
baseline (so neither is counted), then the bytes still held after cancelling
every timer and dropping the handles.

W6 (GC): the median time of ``gc.collect()`` with N pending timers (the
handles are not kept: each timer keeps its own pending timers alive), divided
by the same with none.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import heapq
import itertools
import json
import operator
import os
import platform
import random
import resource
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from baselines import (  # noqa: E402
    SchedTimer,
    factories,
    loop_add,
    loop_sliding,
    uvloop,
)

WINDOW_MS = 500
LEAD_MS = 200


def _percentiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    n = len(values)

    def q(p: float) -> float:
        return values[min(n - 1, max(0, round(p * (n - 1))))]

    return {
        "min": values[0],
        "p50": q(0.50),
        "p99": q(0.99),
        "max": values[-1],
        "mean": statistics.fmean(values),
    }


# -- W3: real-time lateness -----------------------------------------------------


class _NoGC:
    """GC off while the timers are scheduled, back on (and run) before any is due.

    A relative delay is computed from ``monotonic_ns()`` just before each
    schedule call, and the timer reads its own clock inside the call; a
    collection triggered in between (the calls allocate) moves that task's
    real deadline later by the pause, several ms with 200,000 timers, which
    then shows as lateness that no timer caused.  Every implementation is
    scheduled under it; the firing window runs with the collector on.
    """

    def __enter__(self) -> None:
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        gc.enable()
        gc.collect()


def _deadlines(n: int) -> list[int]:
    """Absolute deadlines (ns): a 500 ms window starting far enough ahead
    that scheduling all N timers ends before the first one is due."""
    rnd = random.Random(7)
    lead_ns = max(LEAD_MS * 1_000_000, n * 5_000)  # 5 µs per schedule is ample
    base = time.monotonic_ns() + lead_ns
    return [base + int(rnd.random() * WINDOW_MS * 1_000_000) for _ in range(n)]


class _Recorder:
    """Collects ``fire - deadline`` per task (each callback gets its deadline)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.late_ns: list[int] = []
        self.first = self.last = 0
        self.done = threading.Event()
        mono = time.monotonic_ns
        record = self.late_ns.append

        def cb(deadline_ns: int) -> None:
            now = mono()
            record(now - deadline_ns)
            if not self.first:
                self.first = now
            self.last = now
            if len(self.late_ns) == n:
                self.done.set()

        self.cb = cb

    def result(self, schedule_s: float) -> dict[str, Any]:
        late = [x / 1e6 for x in self.late_ns]
        return {
            "n": self.n,
            "fired": len(late),
            "early": sum(1 for x in late if x < 0),
            "lateness_ms": _percentiles(late),
            "drain_s": (self.last - self.first) / 1e9,
            "schedule_ns_per_op": schedule_s / self.n * 1e9,
        }


def lateness_tickwheel(
    n: int, pure: bool = False, executor: Any = None, cascade_early: bool = True
) -> dict[str, Any]:
    from twins import twin_package

    from tickwheel import timer as tw

    # pure: the SystemTimer of tickwheel's copy built on the twins.
    cls = twin_package().SystemTimer if pure else tw.SystemTimer
    rec = _Recorder(n)
    cb, mono = rec.cb, time.monotonic_ns
    with cls(name="bench", executor=executor, cascade_early=cascade_early) as timer:
        schedule = timer.schedule
        start = time.perf_counter()
        with _NoGC():
            for deadline in _deadlines(n):
                schedule((deadline - mono()) / 1e6, cb, deadline)
        schedule_s = time.perf_counter() - start
        if not rec.done.wait(60):
            raise RuntimeError(f"only {len(rec.late_ns)} of {n} fired")
    return rec.result(schedule_s)


def lateness_loop(n: int, use_uvloop: bool) -> dict[str, Any]:
    loop = uvloop.new_event_loop() if use_uvloop else asyncio.new_event_loop()
    rec = _Recorder(n)
    cb, mono = rec.cb, time.monotonic_ns

    async def main() -> float:
        call_later = loop.call_later
        start = time.perf_counter()
        with _NoGC():
            for deadline in _deadlines(n):
                call_later((deadline - mono()) / 1e9, cb, deadline)
        schedule_s = time.perf_counter() - start
        while not rec.done.is_set():
            await asyncio.sleep(0.05)
        return schedule_s

    try:
        schedule_s = loop.run_until_complete(asyncio.wait_for(main(), 60))
    finally:
        loop.close()
    return rec.result(schedule_s)


def lateness_heapq(n: int) -> dict[str, Any]:
    """A heapq timer driven by the simplest loop: sleep until the head is due."""
    rec = _Recorder(n)
    cb = rec.cb
    heap: list[list[Any]] = []
    seq = itertools.count()
    start = time.perf_counter()
    with _NoGC():
        for deadline in _deadlines(n):
            heapq.heappush(heap, [deadline / 1e9, next(seq), cb, deadline])
    schedule_s = time.perf_counter() - start
    while heap:
        wait = heap[0][0] - time.monotonic()
        if wait > 0:
            time.sleep(wait)
            continue
        entry = heapq.heappop(heap)
        entry[2](entry[3])
    return rec.result(schedule_s)


def lateness_sched(n: int) -> dict[str, Any]:
    import sched

    rec = _Recorder(n)
    cb = rec.cb
    s = sched.scheduler(time.monotonic)
    start = time.perf_counter()
    with _NoGC():
        for deadline in _deadlines(n):
            s.enterabs(deadline / 1e9, 0, cb, (deadline,))
    schedule_s = time.perf_counter() - start
    s.run()
    return rec.result(schedule_s)


def lateness_spin(n: int) -> dict[str, Any]:
    """The floor this host allows: no timer, one thread spins to each deadline.

    The deadlines are sorted up front and a busy loop on ``monotonic_ns``
    calls the same callback at each one, so the only lateness left is the
    callback's own cost and the time the host did not run this thread (on a
    shared VM, stalls of several ms).  A timer on the same host cannot do
    better; tickwheel also rounds each deadline up to its 1 ms tick.
    """
    rec = _Recorder(n)
    cb, mono = rec.cb, time.monotonic_ns
    start = time.perf_counter()
    deadlines = sorted(_deadlines(n))
    schedule_s = time.perf_counter() - start
    for deadline in deadlines:
        while mono() < deadline:
            pass
        cb(deadline)
    return rec.result(schedule_s)


def lateness_tick(n: int) -> dict[str, Any]:
    """An ideal never-early timer with a 1 ms tick: no data structure at all.

    The deadlines are sorted up front; one thread sleeps until the next one's
    millisecond boundary (rounded up, as tickwheel rounds) and then calls
    every callback due by the boundary it woke at.  Its lateness is what the
    rounding, this host's wake-up latency and the callbacks' own time add up
    to: what a timer that sleeps between ticks can reach here, by design.
    """
    rec = _Recorder(n)
    cb, mono, sleep = rec.cb, time.monotonic_ns, time.sleep
    start = time.perf_counter()
    deadlines = sorted(_deadlines(n))
    schedule_s = time.perf_counter() - start
    i = 0
    while i < n:
        boundary = -(-deadlines[i] // 1_000_000) * 1_000_000
        wait = boundary - mono()
        if wait > 0:
            sleep(wait / 1e9)
        passed = mono() // 1_000_000 * 1_000_000  # the latest boundary reached
        while i < n and deadlines[i] <= passed:
            cb(deadlines[i])
            i += 1
    return rec.result(schedule_s)


LATENESS: dict[str, Callable[[int], dict[str, Any]]] = {
    "tickwheel": lateness_tickwheel,
    "tickwheel-inline": lambda n: lateness_tickwheel(n, executor="inline"),
    "floor-spin": lateness_spin,
    "floor-tick": lateness_tick,
    # Kafka's cascading (all of a bucket when its slot starts), for comparison.
    "tickwheel-kafka-cascade": lambda n: lateness_tickwheel(n, cascade_early=False),
    "tickwheel-py": lambda n: lateness_tickwheel(n, pure=True),
    "heapq": lateness_heapq,
    "sched": lateness_sched,
    "asyncio": lambda n: lateness_loop(n, False),
}
if uvloop is not None:
    LATENESS["uvloop"] = lambda n: lateness_loop(n, True)


# -- W3 stall: the longest poll on the manual clock ------------------------------


STALL_POLICIES = {
    # impl: (cascade early, wake for precascade work too)
    "tickwheel": (True, True),
    "tickwheel-due-wakes": (True, False),
    "tickwheel-kafka-cascade": (False, False),
}


def stall(impl: str, n: int) -> dict[str, Any]:
    """W3's load on a MockTimer driven as the reaper drives it: the longest poll.

    A poll is what the reaper does when a bucket is due; while it runs, no
    task runs, so its longest duration is the floor of the real-time p99.
    The clock jumps from one wake-up to the next, as the reaper sleeps:
    ``tickwheel`` wakes when a bucket is due or ``next_precascade_ms`` says
    early cascading has work, and calls ``precascade`` to exhaustion after
    each wake-up (what the reaper does while idle); ``tickwheel-due-wakes``
    wakes only for due buckets (the reaper before it consulted
    ``next_precascade_ms``); ``tickwheel-kafka-cascade`` never cascades
    early (Kafka cascades a bucket all at once when its slot starts).
    """
    from tickwheel import timer as tw

    if impl not in STALL_POLICIES:
        raise ValueError(f"stall: unknown impl {impl!r}")
    early, wake_for_work = STALL_POLICIES[impl]
    lead = max(LEAD_MS, n * 5_000 // 1_000_000)
    polls: list[int] = []
    precascade_ns = 0
    wakes = 0
    # Where the window falls against the levels' slots decides which big
    # bucket comes due inside it: try eight starts across a level-2 slot.
    # Each start runs REPEAT times with the same seed, so the same polls
    # happen in the same order; a poll's time is its fastest run (a host
    # stall can only lengthen a poll, and rarely hits the same one twice).
    for start in range(0, 400, 50):
        best: list[int] = []
        for _ in range(STALL_REPEAT):
            times, pc_ns, woke = _stall_run(
                tw.MockTimer, start, lead, n, early, wake_for_work
            )
            best = times if not best else [min(a, b) for a, b in zip(best, times)]
            precascade_ns += pc_ns
            wakes += woke
        polls += best
    precascade_ns //= STALL_REPEAT
    wakes //= STALL_REPEAT
    polls.sort()
    return {
        "n": n,
        "wakes": wakes,
        "worst_poll_ms": polls[-1] / 1e6,
        "p99_poll_ms": polls[int(0.99 * (len(polls) - 1))] / 1e6,
        "precascade_ms_total": precascade_ns / 1e6,
    }


STALL_REPEAT = 3


def _stall_run(
    timer_cls: Any, start: int, lead: int, n: int, early: bool, wake_for_work: bool
) -> tuple[list[int], int, int]:
    """One stall run: (the window's poll times in ns, precascade ns, wake-ups)."""
    rnd = random.Random(7 + start)
    clock = time.perf_counter_ns
    timer = timer_cls(start_ms=start)
    for _ in range(n):
        timer.schedule(lead + rnd.random() * WINDOW_MS, _cb)
    polls: list[int] = []
    precascade_ns = wakes = 0
    ms = start
    while len(timer):
        wake = [timer.next_expiration_ms]
        if wake_for_work:
            wake.append(timer.next_precascade_ms)
        ms = max(ms, min(x for x in wake if x is not None))
        timer.now_ns = ms * 1_000_000
        wakes += 1
        t0 = clock()
        due = timer._take_due(ms)
        elapsed = clock() - t0
        if ms >= start + lead:
            polls.append(elapsed)  # the polls while tasks fall due
        timer._run(due, None)
        while early:
            t0 = clock()
            looked = timer.precascade()
            precascade_ns += clock() - t0
            if not looked:
                break
    return polls, precascade_ns, wakes


# -- dispatch: due tasks handed to the executor ---------------------------------

DISPATCH_POOL = 4
DISPATCH_IMPLS = ["pool", "pool-per-task", "pool-batch", "default", "inline"]


def dispatch(impl: str, n: int) -> dict[str, Any]:
    """N no-op tasks, all due, handed to the executor by one advance_clock.

    ``pool`` is a ``SystemTimer`` on a ``ThreadPoolExecutor(4)``: per bucket,
    four runners that take its tasks in turn; ``pool-per-task`` the same with
    one submit per task (Kafka's way); ``pool-batch`` with each bucket
    submitted as one job (tickwheel before: blocking callbacks of one bucket
    ran one after another on one pool thread); ``default`` and ``inline``
    batch.  The
    deadlines are spread over W3's 500 ms window; a fake clock jumps past
    them all, so the call polls every bucket.  ``dispatch_ms`` is the time
    spent in that call (the thread keeping time does nothing else meanwhile:
    a later bucket waits that long), ``total_ms`` the time until the last
    task has run; the best of three runs of each.
    """
    import concurrent.futures

    from tickwheel import timer as tw

    if impl not in DISPATCH_IMPLS:
        raise ValueError(f"dispatch: unknown impl {impl!r}")

    class BatchTimer(tw.SystemTimer):  # type: ignore[misc]
        def _dispatch(self, batch: list[Any], reraise: bool = False) -> None:
            self._executor.submit(self._run_batch, batch)

    class PerTaskTimer(tw.SystemTimer):  # type: ignore[misc]
        def _dispatch(self, batch: list[Any], reraise: bool = False) -> None:
            submit, run_one = self._executor.submit, self._run_one
            for task in batch:
                submit(run_one, task)

    best: dict[str, float] = {}
    for _ in range(3):
        now = [0]
        pool = (
            concurrent.futures.ThreadPoolExecutor(DISPATCH_POOL)
            if impl.startswith("pool")
            else None
        )
        executor: Any = {"default": None, "inline": "inline"}.get(impl, pool)
        cls = {"pool-batch": BatchTimer, "pool-per-task": PerTaskTimer}.get(
            impl, tw.SystemTimer
        )
        timer = cls(
            "dispatch",
            reaper=False,
            executor=executor,
            start_ms=0,
            clock=lambda: now[0],
        )
        done = threading.Event()
        count = itertools.count(1)

        def cb() -> None:
            if next(count) == n:
                done.set()

        rnd = random.Random(11)
        for _ in range(n):
            timer.schedule(rnd.random() * WINDOW_MS, cb)
        now[0] = (WINDOW_MS + 1) * 1_000_000
        gc.collect()
        t0 = time.perf_counter_ns()
        timer.advance_clock(0)
        t1 = time.perf_counter_ns()
        if not done.wait(600):
            raise RuntimeError(f"dispatch {impl}: tasks did not all run")
        t2 = time.perf_counter_ns()
        timer.close()
        if pool is not None:
            pool.shutdown(wait=True)
        for key, value in (
            ("dispatch_ms", (t1 - t0) / 1e6),
            ("total_ms", (t2 - t0) / 1e6),
        ):
            best[key] = min(best.get(key, value), value)
    return {
        "n": n,
        "pool_threads": DISPATCH_POOL if impl.startswith("pool") else None,
        **best,
        "ns_per_task": best["total_ms"] * 1e6 / n,
    }


# -- W4: memory ----------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _cb() -> None:
    pass


def memory(impl: str, n: int) -> dict[str, Any]:
    timer = _make(impl)
    rnd = random.Random(3)
    delays = [rnd.randint(1, 30_000) for _ in range(n)]
    handles: list[Any] = [None] * n
    schedule = timer.schedule
    gc.collect()
    tracemalloc.start()
    base_traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    gc.collect()
    base_rss = _rss_bytes()
    for i, d in enumerate(delays):
        handles[i] = schedule(d, _cb)
    gc.collect()
    rss = _rss_bytes() - base_rss
    # tracemalloc slows allocation down a lot, so the traced figure comes
    # from a second, smaller pass on a fresh timer of the same kind.
    traced_n = min(n, 200_000)
    tracer = _make(impl)
    tracer_handles: list[Any] = [None] * traced_n
    tracemalloc.start()
    t0 = tracemalloc.get_traced_memory()[0]
    for i in range(traced_n):
        tracer_handles[i] = tracer.schedule(delays[i], _cb)
    traced = tracemalloc.get_traced_memory()[0] - t0
    cancel = tracer.cancel
    for h in tracer_handles:
        cancel(h)
    tracer_handles = None  # type: ignore[assignment]
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - t0
    tracemalloc.stop()
    del base_traced
    return {
        "n": n,
        "rss_bytes_per_timer": rss / n,
        "traced_n": traced_n,
        "traced_bytes_per_timer": traced / traced_n,
        "held_after_cancel_bytes_per_timer": held / traced_n,
    }


class _Floor:
    """A "timer" whose calls cost the least a benchmark loop can pay.

    ``floor``: ``operator.is_`` as schedule, ``id`` as cancel (two C calls
    that do nothing).  ``floor-clock``: schedule reads the clock and adds
    the delay (bench/_floor.pyx), which any relative-delay timer must do.
    ``floor-handle``: that, and schedule returns a new cancellable handle
    (a freelisted compiled object holding the deadline and the callable)
    whose type's ``cancel`` drops the callable: tickwheel's call shape with
    no wheel behind it.  ``floor-node``: the same with the handle padded to
    the size of a tickwheel node.  ``floor-ring``: the node also linked into
    one of 20 circular lists picked by the delay, and unlinked by cancel
    (the least an O(1)-cancel timer does); ``floor-ring-clock``: the list
    picked from the deadline's millisecond instead, as a timer must.
    """

    def __init__(self, kind: str) -> None:
        self.cancel = id
        self._ring = None
        if kind == "floor":
            self.schedule = operator.is_
            return
        import pyximport

        pyximport.install(language_level=3, inplace=False)
        from _floor import (
            ClockHandle,
            ClockNode,
            ClockOnly,
            ClockRing,
            Handle,
            Node,
            RingNode,
        )

        if kind in ("floor-ring", "floor-ring-clock"):
            self._ring = ClockRing(by_clock=kind == "floor-ring-clock")
            self.schedule = self._ring.schedule
            self.cancel = RingNode.cancel
        elif kind == "floor-clock":
            self.schedule = ClockOnly().schedule
        elif kind == "floor-node":
            self.schedule = ClockNode().schedule
            self.cancel = Node.cancel
        else:
            self.schedule = ClockHandle().schedule
            self.cancel = Handle.cancel

    def close(self) -> None:
        if self._ring is not None:
            self._ring.close()


def _make(impl: str) -> Any:
    if impl == "sched":
        return SchedTimer()
    if impl in FLOOR_IMPLS:
        return _Floor(impl)
    return factories()[impl]()


# -- W6: garbage collector --------------------------------------------------------


def gc_pause(impl: str, n: int) -> dict[str, Any]:
    def median_collect(reps: int = 7) -> float:
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            gc.collect()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    empty = median_collect()
    timer = _make(impl)
    rnd = random.Random(5)
    schedule = timer.schedule
    # The handles are not kept: every timer keeps its pending timers alive
    # itself, and a user's list of a million handles would be the user's
    # traversal cost, not the timer's.
    for _ in range(n):
        schedule(rnd.randint(1, 30_000), _cb)
    loaded = median_collect()
    timer.close()
    return {
        "n": n,
        "collect_empty_ms": empty * 1e3,
        "collect_loaded_ms": loaded * 1e3,
        "ratio": loaded / empty,
    }


# -- W1/W2 side by side: interleaved rounds ---------------------------------------

INTERLEAVED_IMPLS = [
    "tickwheel",
    "heapq",
    "sched",
    "asyncio",
    "uvloop",
    "tickwheel-py",
    "floor",
    "floor-clock",
    "floor-handle",
    "floor-node",
]
FLOOR_IMPLS = (
    "floor",
    "floor-clock",
    "floor-handle",
    "floor-node",
    "floor-ring",
    "floor-ring-clock",
)


def interleaved(impl: str, n: int, rounds: int = 7) -> dict[str, Any]:
    """W1 and W2-sliding, every implementation once per round, rounds in turn.

    pytest-benchmark times all rounds of one implementation, then the next:
    on a shared host whose speed drifts over a minute, that biases a ratio
    by as much as the drift.  Here each round times every implementation
    back to back (starting with a different one each round), and a ratio is
    taken within each round; the result is the median over rounds of those
    ratios, next to each implementation's median time.  ``impl`` is ``all``
    or a comma-separated list; tickwheel is always included (the reference).
    """
    names = INTERLEAVED_IMPLS if impl == "all" else ["tickwheel", *impl.split(",")]
    available = {**factories(), **dict.fromkeys(FLOOR_IMPLS)}
    # uvloop only where it is installed
    names = list(dict.fromkeys(x for x in names if x in available))
    rnd = random.Random(20261122)  # the suite's delays (bench/conftest.py)
    delays = [rnd.randint(1, 30_000) for _ in range(n)]
    k = max(1, n // 10)

    def add(timer: Any) -> None:
        loop_add(timer.schedule, delays, _cb)

    def sliding(timer: Any) -> None:
        loop_sliding(timer.schedule, timer.cancel, delays, _cb, k)

    workloads: dict[str, Callable[[Any], None]] = {"W1-add": add, "W2-sliding": sliding}
    times: dict[str, dict[str, list[float]]] = {
        w: {x: [] for x in names} for w in workloads
    }
    clock = time.perf_counter_ns
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for w, body in workloads.items():
            for name in order:
                if w == "W2-sliding" and name == "sched":
                    continue  # O(n) cancel: minutes per round
                timer = _make(name)
                gc.collect()
                t0 = clock()
                body(timer)
                elapsed = clock() - t0
                timer.close()
                times[w][name].append(elapsed / n)
    out: dict[str, Any] = {"n": n, "rounds": rounds, "workloads": {}}
    for w, by_impl in times.items():
        ref = by_impl["tickwheel"]
        out["workloads"][w] = {
            name: {
                "median_ns": statistics.median(v),
                "ratio_median": statistics.median(a / b for a, b in zip(v, ref)),
                "ratio_min": min(a / b for a, b in zip(v, ref)),
                "ratio_max": max(a / b for a, b in zip(v, ref)),
            }
            for name, v in by_impl.items()
            if v
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "what",
        choices=["lateness", "stall", "dispatch", "memory", "gc", "interleaved"],
    )
    parser.add_argument("impl")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    args = parser.parse_args(argv)
    if args.what == "interleaved":
        result = interleaved(args.impl, args.n, args.rounds)
    elif args.what == "lateness":
        result = LATENESS[args.impl](args.n)
    elif args.what == "stall":
        result = stall(args.impl, args.n)
    elif args.what == "dispatch":
        result = dispatch(args.impl, args.n)
    elif args.what == "memory":
        result = memory(args.impl, args.n)
    else:
        result = gc_pause(args.impl, args.n)
    result.update(
        what=args.what,
        impl=args.impl,
        python=platform.python_version(),
        peak_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
