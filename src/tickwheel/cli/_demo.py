"""``tickwheel demo``: a SystemTimer smoke run (the default command).

The demo schedules a few thousand timers on a real SystemTimer, cancels a
share of them at random, waits for the rest, and prints what happened: how
many fired and were cancelled, whether any was lost, fired twice or fired
early, and the lateness distribution.  It exits non-zero if any task was
lost, duplicated or early, so it doubles as a smoke test of an install.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from .. import USE_EXTENSIONS, __version__
from ..timer import SystemTimer


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def run_demo(timers: int, max_delay_ms: int, cancel_share: float, seed: int) -> int:
    """Run the demo and print a summary; return the process exit code."""
    rnd = random.Random(seed)
    lock = threading.Lock()
    fired: dict[int, int] = {}
    lateness_ms: list[float] = []
    early = 0
    all_done = threading.Event()
    expected = [0]

    def fire(i: int, deadline_ns: int) -> None:
        nonlocal early
        late = time.monotonic_ns() - deadline_ns
        with lock:
            fired[i] = fired.get(i, 0) + 1
            lateness_ms.append(late / 1e6)
            if late < 0:
                early += 1
            if len(lateness_ms) == expected[0]:
                all_done.set()

    start = time.perf_counter()
    with SystemTimer(name="tickwheel-demo") as timer:
        tasks = []
        for i in range(timers):
            delay = rnd.randint(1, max_delay_ms)
            # The deadline is taken before schedule(), so it is a lower bound
            # of the timer's own: a negative lateness would be a real bug.
            deadline_ns = time.monotonic_ns() + delay * 1_000_000
            tasks.append(timer.schedule(delay, fire, i, deadline_ns))
        schedule_s = time.perf_counter() - start
        cancelled = {
            i for i, t in enumerate(tasks) if rnd.random() < cancel_share and t.cancel()
        }
        with lock:
            expected[0] = timers - len(cancelled)
            if len(lateness_ms) == expected[0]:
                all_done.set()
        finished = all_done.wait(max_delay_ms / 1000 + 30)
        pending = len(timer)
    elapsed = time.perf_counter() - start

    lost = sum(1 for i in range(timers) if i not in cancelled and i not in fired)
    duplicates = sum(1 for n in fired.values() if n > 1)
    ran_cancelled = sum(1 for i in cancelled if i in fired)
    late = sorted(lateness_ms)
    print(
        f"tickwheel {__version__} demo "
        f"({'accelerated' if USE_EXTENSIONS else 'pure Python'})"
    )
    print(
        f"  timers scheduled     {timers:>10,}   "
        f"({schedule_s * 1e9 / timers:,.0f} ns each)"
    )
    print(f"  cancelled            {len(cancelled):>10,}")
    print(f"  fired                {len(fired):>10,}")
    print(f"  lost / duplicated    {lost:>10,} / {duplicates:,}")
    print(f"  cancelled but ran    {ran_cancelled:>10,}")
    print(f"  fired early          {early:>10,}")
    if late:
        print(
            "  lateness ms          "
            f"p50 {_percentile(late, 0.50):.3f}  p99 {_percentile(late, 0.99):.3f}  "
            f"max {late[-1]:.3f}  mean {statistics.fmean(late):.3f}"
        )
    print(f"  pending at close     {pending:>10,}")
    print(f"  wall time            {elapsed:>10.2f} s")
    ok = finished and not lost and not duplicates and not early and not ran_cancelled
    print("  result               " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


def add_demo_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``demo`` parser to ``sub``."""
    demo: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="schedule timers on a SystemTimer and report (the default command)",
        description="Schedule timers on a real SystemTimer, cancel some, and "
        "report lateness and anything lost, duplicated or early (exit 1 if any).",
    )
    demo.add_argument(
        "--timers", type=int, default=5_000, help="how many timers (default: 5000)"
    )
    demo.add_argument(
        "--max-delay-ms",
        type=int,
        default=1_000,
        help="delays are drawn from 1..this (default: 1000)",
    )
    demo.add_argument(
        "--cancel-share",
        type=float,
        default=0.2,
        help="share of the timers to cancel (default: 0.2)",
    )
    demo.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    return demo


def run_demo_command(demo: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Check the demo's arguments and run it."""
    if args.timers < 1 or args.max_delay_ms < 1 or not 0 <= args.cancel_share <= 1:
        demo.error("--timers and --max-delay-ms must be >= 1, --cancel-share in [0, 1]")
    return run_demo(args.timers, args.max_delay_ms, args.cancel_share, args.seed)
