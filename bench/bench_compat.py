"""Benchmarks of the drop-in timers against the standard library, side by side.

Run ``python bench/bench_compat.py`` (a few minutes: stdlib ``sched`` alone
needs ~15 s per repeat) or ``python bench/bench_compat.py --quick`` (seconds;
smaller sizes, so the ratios are indicative only).  It prints one Markdown
table; every time is the median of ``--repeat`` runs, measured with the
garbage collector enabled, as in a real program.

Goals, checked in the "goal" column:

* 100,000 ``call_later`` + ``cancel``: the wheel on the default asyncio loop
  >= 5x faster than ``loop.call_later`` (also shown under uvloop);
* 1,000,000 pending asyncio timeouts: <= half of asyncio's memory
  (tracemalloc), both for ``call_later`` handles and ``timeout()`` blocks;
* ``sched``: enter + cancel of 20,000 events >= 100x faster than stdlib;
* 10,000 ``Timer.start()`` + ``cancel()`` vs ``threading.Timer``: threads
  created, wall time and peak RSS (each side in its own subprocess).

Also shown: moving one of 10,000 pending idle timers per message,
asyncio's ``cancel()`` + ``call_later()`` against ``handle.postpone()``, on
the default loop and under uvloop.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import sched
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import tickwheel
from tickwheel import compat_asyncio as tw
from tickwheel import compat_sched
from tickwheel.compat_threading import Timer, shutdown

Row = tuple[str, str, str, str, str]


def _median_ns(fn: Callable[[], float], repeat: int) -> float:
    return statistics.median(fn() for _ in range(repeat))


def _noop() -> None:
    pass


# -- asyncio: call_later + cancel ------------------------------------------------------


def _medians_on_loop(main: Callable[[], Any], use_uvloop: bool) -> dict[str, float]:
    """Run ``main()`` (a coroutine returning per-variant times) on a fresh
    asyncio or uvloop loop, close both the wheel and the loop, and return
    the median time of each variant."""
    loop: asyncio.AbstractEventLoop
    if use_uvloop:
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        times = loop.run_until_complete(main())
    finally:
        tw.get_wheel(loop).close()
        loop.close()
    return {k: statistics.median(v) for k, v in times.items()}


def bench_call_later(n: int, repeat: int, use_uvloop: bool) -> dict[str, float]:
    """Median seconds for n call_later+cancel pairs: loop, wheel method, module."""

    async def main() -> dict[str, list[float]]:
        loop = asyncio.get_running_loop()
        wheel = tw.get_wheel()
        variants: dict[str, Callable[..., Any]] = {
            "loop.call_later": loop.call_later,
            "wheel.call_later": wheel.call_later,
            "compat_asyncio.call_later": tw.call_later,
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        rng = range(n)
        for _ in range(repeat):
            for name, call_later in variants.items():  # interleaved rounds
                await asyncio.sleep(0)  # asyncio drops its cancelled handles here
                t0 = time.perf_counter()
                for _ in rng:
                    call_later(100.0, _noop).cancel()
                times[name].append(time.perf_counter() - t0)
        return times

    return _medians_on_loop(main, use_uvloop)


# -- asyncio: move a pending timer (heartbeat / idle timeout) --------------------------


def bench_postpone(
    n: int, moves: int, repeat: int, use_uvloop: bool
) -> dict[str, float]:
    """Median seconds for ``moves`` moves of one of ``n`` pending idle timers.

    Each move pushes one connection's idle timeout 30 s out, as a server does
    on every message: asyncio cancels the handle and calls call_later again;
    the wheel can do the same, or move the handle with ``postpone()``.  The
    loop runs one iteration every 1,000 moves (asyncio drops cancelled
    handles there), for every variant alike.
    """

    async def main() -> dict[str, list[float]]:
        loop = asyncio.get_running_loop()
        wheel = tw.get_wheel()

        def cancel_call_later(call_later: Callable[..., Any]) -> Callable[[], Any]:
            handles = [call_later(30.0, _noop) for _ in range(n)]

            async def run() -> None:
                i = 0
                for k in range(moves):
                    handles[i].cancel()
                    handles[i] = call_later(30.0, _noop)
                    i = i + 1 if i + 1 < n else 0
                    if k % 1000 == 999:
                        await asyncio.sleep(0)

            return run

        def postpone() -> Callable[[], Any]:
            handles = [wheel.call_later(30.0, _noop) for _ in range(n)]

            async def run() -> None:
                i = 0
                for k in range(moves):
                    handles[i].postpone(30.0)
                    i = i + 1 if i + 1 < n else 0
                    if k % 1000 == 999:
                        await asyncio.sleep(0)

            return run

        variants = {
            "loop cancel+call_later": lambda: cancel_call_later(loop.call_later),
            "wheel cancel+call_later": lambda: cancel_call_later(wheel.call_later),
            "handle.postpone": postpone,
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(repeat):
            for name, make in variants.items():  # interleaved rounds
                run = make()
                await asyncio.sleep(0)
                t0 = time.perf_counter()
                await run()
                times[name].append(time.perf_counter() - t0)
                del run
                gc.collect()
        return times

    return _medians_on_loop(main, use_uvloop)


# -- asyncio: memory of pending timeouts -----------------------------------------------


def _traced(fn: Callable[[], Any]) -> tuple[int, Any]:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keep = fn()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, keep


def bench_memory(n: int) -> dict[str, float]:
    """Bytes per pending timer: call_later handles and entered timeout() blocks."""

    async def main() -> dict[str, float]:
        loop = asyncio.get_running_loop()
        wheel = tw.get_wheel()
        out: dict[str, float] = {}
        for name, call_later in (
            ("loop.call_later", loop.call_later),
            ("wheel.call_later", wheel.call_later),
        ):
            size, handles = _traced(
                lambda: [call_later(100.0, _noop) for _ in range(n)]
            )
            out[name] = size / n
            for h in handles:
                h.cancel()
            del handles
            await asyncio.sleep(0)
        for name, factory in (
            ("asyncio.timeout", asyncio.timeout),
            ("compat_asyncio.timeout", tw.timeout),
        ):
            # n nested, entered blocks in one task; the list of context
            # managers costs both sides the same 8 bytes each.
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            cms = [factory(100.0) for _ in range(n)]
            for cm in cms:
                await cm.__aenter__()
            out[name] = (tracemalloc.get_traced_memory()[0] - before) / n
            tracemalloc.stop()
            for cm in reversed(cms):
                await cm.__aexit__(None, None, None)
            del cms
            await asyncio.sleep(0)
        return out

    return asyncio.run(main())


# -- sched -----------------------------------------------------------------------------


def bench_sched(n: int, repeat: int, stdlib_repeat: int) -> dict[str, float]:
    """Median seconds to enter n events, then cancel them in entry order."""

    def one(cls: Any) -> float:
        s = cls()
        t0 = time.perf_counter()
        events = [s.enter(10 + i * 1e-4, 0, _noop) for i in range(n)]
        for e in events:
            s.cancel(e)
        elapsed = time.perf_counter() - t0
        assert s.empty()
        return elapsed

    return {
        "sched.scheduler": _median_ns(lambda: one(sched.scheduler), stdlib_repeat),
        "compat_sched.scheduler": _median_ns(
            lambda: one(compat_sched.scheduler), repeat
        ),
    }


# -- threading.Timer (one subprocess per side, for a clean peak RSS) -------------------


def timer_child(kind: str, n: int) -> dict[str, float]:
    cls: Any = threading.Timer if kind == "stdlib" else Timer
    before = threading.active_count()
    created = 0
    peak_threads = 0
    t0 = time.perf_counter()
    timers = [cls(60.0, _noop) for _ in range(n)]
    for t in timers:
        t.start()
    peak_threads = threading.active_count() - before
    for t in timers:
        t.cancel()
    for t in timers:
        t.join()
    elapsed = time.perf_counter() - t0
    created = peak_threads
    if kind != "stdlib":
        shutdown()
    return {"seconds": elapsed, "threads": created, "peak_rss_mb": _peak_rss_mb()}


def _peak_rss_mb() -> float:
    # VmHWM is this process's own peak; ru_maxrss would include the parent's
    # peak, which Linux carries across fork+exec.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_timer(n: int, repeat: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for kind in ("stdlib", "tickwheel"):
        runs = []
        for _ in range(repeat):
            proc = subprocess.run(
                [sys.executable, __file__, "--timer-child", kind, str(n)],
                check=True,
                capture_output=True,
                text=True,
            )
            runs.append(json.loads(proc.stdout))
        out[kind] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return out


# -- report ----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; seconds")
    parser.add_argument("--repeat", type=int, default=None, help="repeats (median)")
    parser.add_argument(
        "--timer-child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.timer_child:
        print(json.dumps(timer_child(args.timer_child[0], int(args.timer_child[1]))))
        return

    quick = args.quick
    repeat = args.repeat or (3 if quick else 7)
    n_call = 10_000 if quick else 100_000
    n_mem = 50_000 if quick else 1_000_000
    n_sched = 2_000 if quick else 20_000
    n_timer = 1_000 if quick else 10_000
    rows: list[Row] = []

    def _mark(met: bool) -> str:
        # Goals are stated for the full sizes (sched's stdlib cost is O(n^2));
        # quick mode only shows that everything runs.
        if quick:
            return "(full mode)"
        return "✅" if met else "❌"

    def ratio_row(
        what: str, base: float, ours: float, goal: float | None, unit_n: int
    ) -> Row:
        r = base / ours
        verdict = "" if goal is None else f"≥ {goal:g}× {_mark(r >= goal)}"
        return (
            what,
            f"{base / unit_n * 1e9:,.0f} ns",
            f"{ours / unit_n * 1e9:,.0f} ns",
            f"{r:.1f}×",
            verdict,
        )

    for use_uvloop in (False, True):
        label = "uvloop" if use_uvloop else "asyncio loop"
        try:
            res = bench_call_later(n_call, repeat, use_uvloop)
        except ImportError:
            rows.append(
                (f"call_later+cancel ({label})", "n/a", "n/a", "", "uvloop missing")
            )
            continue
        base = res["loop.call_later"]
        goal = None if use_uvloop else 5.0
        rows.append(
            ratio_row(
                f"{n_call:,} call_later+cancel, {label}: loop vs wheel.call_later",
                base,
                res["wheel.call_later"],
                goal,
                n_call,
            )
        )
        rows.append(
            ratio_row(
                f"… vs module-level compat_asyncio.call_later ({label})",
                base,
                res["compat_asyncio.call_later"],
                None,
                n_call,
            )
        )

    n_idle, n_moves = (1_000, 100_000) if quick else (10_000, 1_000_000)
    for use_uvloop in (False, True):
        label = "uvloop" if use_uvloop else "asyncio loop"
        try:
            res = bench_postpone(n_idle, n_moves, repeat, use_uvloop)
        except ImportError:
            rows.append((f"postpone ({label})", "n/a", "n/a", "", "uvloop missing"))
            continue
        rows.append(
            ratio_row(
                f"{n_moves:,} moves of {n_idle:,} pending timers, {label}: "
                "loop cancel+call_later vs handle.postpone",
                res["loop cancel+call_later"],
                res["handle.postpone"],
                None,
                n_moves,
            )
        )
        rows.append(
            ratio_row(
                f"… wheel cancel+call_later vs handle.postpone ({label})",
                res["wheel cancel+call_later"],
                res["handle.postpone"],
                None,
                n_moves,
            )
        )

    mem = bench_memory(n_mem)
    for base_k, ours_k in (
        ("loop.call_later", "wheel.call_later"),
        ("asyncio.timeout", "compat_asyncio.timeout"),
    ):
        r = mem[ours_k] / mem[base_k]
        rows.append(
            (
                f"{n_mem:,} pending {base_k} vs {ours_k}: bytes each",
                f"{mem[base_k]:.0f} B",
                f"{mem[ours_k]:.0f} B",
                f"{r:.2f}×",
                f"≤ 0.5× {_mark(r <= 0.5)}",
            )
        )

    sch = bench_sched(n_sched, repeat, 3 if not quick else repeat)
    rows.append(
        ratio_row(
            f"{n_sched:,} sched enter+cancel (per event)",
            sch["sched.scheduler"],
            sch["compat_sched.scheduler"],
            100.0,
            n_sched,
        )
    )

    tim = bench_timer(n_timer, 3 if not quick else 1)
    s, o = tim["stdlib"], tim["tickwheel"]
    rows.append(
        (
            f"{n_timer:,} Timer start+cancel+join: threads created",
            f"{s['threads']:,.0f}",
            f"{o['threads']:,.0f}",
            "",
            "",
        )
    )
    rows.append(
        (
            f"{n_timer:,} Timer start+cancel+join: wall time",
            f"{s['seconds'] * 1e3:,.0f} ms",
            f"{o['seconds'] * 1e3:,.0f} ms",
            f"{s['seconds'] / o['seconds']:.1f}×",
            "",
        )
    )
    rows.append(
        (
            f"{n_timer:,} Timer start+cancel+join: peak RSS of the process",
            f"{s['peak_rss_mb']:.0f} MB",
            f"{o['peak_rss_mb']:.0f} MB",
            "",
            "",
        )
    )

    core = "C extension" if tickwheel.USE_EXTENSIONS else "pure Python"
    print(
        f"tickwheel {tickwheel.__version__} ({core}), "
        f"Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs; median of {repeat} "
        f"({'quick' if quick else 'full'} mode), GC enabled\n"
    )
    print("| benchmark | stdlib | tickwheel | ratio | goal |")
    print("|---|---:|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
