"""Leak check, run in a fresh interpreter.

Used by tests/test_leaks.py and tests/reliability/leaks.py.

Why a separate process: RSS and tracemalloc are only meaningful when nothing
else (pytest, other tests) allocates meanwhile.

Phases, each after a warm-up of 10% of its cycles (at least 10,000):

* ``cancel``: ``schedule`` + ``cancel`` cycles, delays spread over every
  wheel level, the clock moving now and then so buckets rotate;
* ``fire``: ``schedule`` then ``advance_clock`` until it has run, in batches;
* ``refs``: the callable's and its argument's reference counts are back to
  where they started after both kinds of cycle (a C-level leak of one
  reference per task shows here first);
* ``gc``: a cycle of use (timer, tasks that reference their owner, a
  purgatory, close) leaves nothing for the cyclic GC: ``gc.collect()``
  returns 0 and, with ``gc.DEBUG_SAVEALL``, ``gc.garbage`` holds nothing of
  tickwheel.

Prints one JSON object; exits 1 if a bound is exceeded.

    python tests/isolated/leak_check.py --core c --cancel 10000000 --fire 1000000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import tracemalloc
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_kb() -> int:
    """Resident set size in KiB (Linux /proc; falls back to ru_maxrss)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE // 1024
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def classes(core: str) -> tuple[Any, Any, Any]:
    # A fresh interpreter: the pure core is the one TICKWHEEL_NO_EXTENSIONS=1
    # selects at import (tests/test_leaks.py sets it for --core pure).
    import tickwheel

    if core == "pure" and tickwheel.USE_EXTENSIONS:
        raise SystemExit("--core pure needs TICKWHEEL_NO_EXTENSIONS=1")
    return tickwheel.MockTimer, tickwheel.DelayedOperation, tickwheel.SystemTimer


def _noop(arg: object) -> None:
    pass


DELAYS = [1, 7, 19, 150, 2_000, 45_000, 800_000, 10**9, 3 * 10**11]


def cancel_cycles(timer: Any, n: int, arg: object) -> None:
    schedule = timer.schedule
    delays = DELAYS
    k = len(delays)
    for i in range(n):
        schedule(delays[i % k] + (i & 7), _noop, arg).cancel()
        if not i & 0xFFFF:
            timer.advance_clock(3)


def fire_cycles(timer: Any, n: int, arg: object, batch: int = 1_000) -> int:
    schedule = timer.schedule
    ran = 0
    done = 0
    while done < n:
        m = min(batch, n - done)
        for i in range(m):
            schedule(i % 50, _noop, arg)
        timer.advance_clock(50)
        ran += m
        done += m
    return ran


def measure(name: str, fn: Any, n: int, timer: Any, arg: object) -> dict[str, Any]:
    warm = max(10_000, n // 10)
    fn(timer, warm, arg)
    gc.collect()
    tracemalloc.start()
    tm0 = tracemalloc.get_traced_memory()[0]
    rss0 = rss_kb()
    t0 = time.perf_counter()
    # In ten slices, so a slow climb shows as a trend, not just an end value.
    rss_trace = []
    step = max(1, n // 10)
    done = 0
    while done < n:
        m = min(step, n - done)
        fn(timer, m, arg)
        done += m
        rss_trace.append(rss_kb() - rss0)
    seconds = time.perf_counter() - t0
    gc.collect()
    tm1, tm_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "phase": name,
        "cycles": n,
        "warmup": warm,
        "seconds": round(seconds, 2),
        "rss_kb_after_warmup": rss0,
        "rss_delta_kb": rss_kb() - rss0,
        "rss_delta_kb_trace": rss_trace,
        "tracemalloc_delta_b": tm1 - tm0,
        "tracemalloc_peak_over_start_b": tm_peak - tm0,
        "pending_after": len(timer),
    }


def refcounts(core: str) -> dict[str, Any]:
    MockTimer, _, _ = classes(core)
    timer = MockTimer()
    arg = object()
    fn_before, arg_before = sys.getrefcount(_noop), sys.getrefcount(arg)
    cancel_cycles(timer, 20_000, arg)
    fire_cycles(timer, 20_000, arg)
    # kwargs and the task-as-own-node path too
    for i in range(5_000):
        timer.schedule(i % 20, _noop, arg=arg)
    timer.advance_clock(20)
    for i in range(5_000):
        timer.schedule(10**6, _noop, arg=arg).cancel()
    timer.close()
    del timer
    gc.collect()
    return {
        "phase": "refs",
        "fn_refcount_delta": sys.getrefcount(_noop) - fn_before,
        "arg_refcount_delta": sys.getrefcount(arg) - arg_before,
    }


def gc_cycle(core: str) -> dict[str, Any]:
    """One full cycle of use; then what does the cyclic GC find?"""
    MockTimer, DelayedOperation, SystemTimer = classes(core)
    from tickwheel.purgatory import DelayedOperationPurgatory

    class Owner:
        def __init__(self, timer: Any) -> None:
            # The classic cycle: the object holds its timeout, the timeout
            # holds a bound method of the object.
            self.timeout = timer.schedule(100, self.on_timeout)

        def on_timeout(self) -> None:
            pass

    class Op(DelayedOperation):
        def try_complete(self) -> bool:
            return False

    def use() -> None:
        timer = MockTimer()
        owners = [Owner(timer) for _ in range(100)]
        for o in owners[:50]:
            o.timeout.cancel()
        timer.advance_clock(200)  # the other 50 fire
        for d in (1, 50, 5_000, 10**7):
            timer.schedule(d, _noop, None)
        p = DelayedOperationPurgatory("gc", timer)
        ops = [Op(d) for d in (10, 20, 10**6)]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, [f"k{i}", "shared"])
        ops[0].force_complete()
        p.check_and_complete("shared")
        timer.advance_clock(30)
        p.shutdown()
        timer.close()
        # A real-time timer too, started and closed (threads joined).
        with SystemTimer(name="gc-check") as st:
            st.schedule(10**6, _noop, None)
            st.schedule(0, _noop, None)

    gc.collect()
    gc.collect()
    use()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = gc.collect()
        ours = [
            repr(o)[:120]
            for o in gc.garbage
            if "tickwheel" in (getattr(type(o), "__module__", "") or "")
            or "tickwheel" in repr(type(o))
        ]
        kinds: dict[str, int] = {}
        for o in gc.garbage:
            kinds[type(o).__name__] = kinds.get(type(o).__name__, 0) + 1
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return {
        "phase": "gc",
        "collected": found,
        "tickwheel_objects": ours[:20],
        "garbage_types": kinds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--core", choices=["c", "pure"], default="c")
    parser.add_argument("--cancel", type=int, default=10_000_000)
    parser.add_argument("--fire", type=int, default=1_000_000)
    parser.add_argument("--max-rss-kb", type=int, default=1024)
    parser.add_argument("--max-tracemalloc-b", type=int, default=64 * 1024)
    args = parser.parse_args(argv)
    MockTimer, _, _ = classes(args.core)
    if args.core == "c":
        import tickwheel

        assert tickwheel.USE_EXTENSIONS, "compiled core requested but not built"
    results = [gc_cycle(args.core), refcounts(args.core)]
    arg = object()
    timer = MockTimer()
    results.append(measure("cancel", cancel_cycles, args.cancel, timer, arg))
    timer = MockTimer()
    results.append(measure("fire", fire_cycles, args.fire, timer, arg))
    failures = []
    for r in results:
        if r["phase"] in ("cancel", "fire"):
            if r["rss_delta_kb"] > args.max_rss_kb:
                failures.append(f"{r['phase']}: RSS grew {r['rss_delta_kb']} KiB")
            if r["tracemalloc_delta_b"] > args.max_tracemalloc_b:
                failures.append(
                    f"{r['phase']}: tracemalloc grew {r['tracemalloc_delta_b']} B"
                )
            if r["pending_after"]:
                failures.append(f"{r['phase']}: {r['pending_after']} tasks left")
        elif r["phase"] == "refs":
            if r["fn_refcount_delta"] or r["arg_refcount_delta"]:
                failures.append(f"refcounts changed: {r}")
        elif r["phase"] == "gc":
            if r["collected"] or r["tickwheel_objects"]:
                failures.append(f"gc found cycles: {r}")
    print(
        json.dumps(
            {
                "core": args.core,
                "python": sys.version.split()[0],
                "results": results,
                "failures": failures,
            }
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
