"""W2-sliding against the ring floors: what a link waits for.

Times the sliding-window loop (``baselines.loop_sliding``, delays of
1-30 s, K pending) for tickwheel, ``floor-handle`` and the two ring floors
of ``bench/_floor.pyx``: ``floor-ring`` links each node into one of 20
circular lists picked by the delay and unlinks it on cancel (the least an
O(1)-cancel timer does); ``floor-ring-clock`` picks the list from the
deadline's millisecond, as a timer must, so it waits for the clock
reading.  Every measurement runs in a fresh interpreter (a ring floor
leaves the allocator's free lists in another order than it found them),
implementations alternating within each round::

    python bench/ring_floor.py --rounds 5

prints the median ns per iteration of each and its ratio to
``floor-handle``.  Needs Cython (the floors compile through pyximport).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

IMPLS = ("tickwheel", "floor-handle", "floor-ring", "floor-ring-clock")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def one(impl: str, n: int, k: int, reps: int = 3) -> float:
    """Median ns per iteration of ``reps`` runs of the loop in this process."""
    from baselines import loop_sliding
    from measure import _cb, _make

    rnd = random.Random(20261122)
    delays = [rnd.randint(1, 30_000) for _ in range(n)]
    times = []
    for _ in range(reps):
        timer = _make(impl)
        start = time.perf_counter_ns()
        loop_sliding(timer.schedule, timer.cancel, delays, _cb, k)
        times.append((time.perf_counter_ns() - start) / n)
        timer.close()
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=_positive, default=5)
    ap.add_argument("--n", type=_positive, default=200_000)
    ap.add_argument("--k", type=_positive, default=10_000, help="timers pending")
    ap.add_argument("--one", choices=IMPLS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(one(args.one, args.n, args.k))
        return 0
    got: dict[str, list[float]] = {i: [] for i in IMPLS}
    for _ in range(args.rounds):
        for impl in IMPLS:
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--one", impl,
                 "--n", str(args.n), "--k", str(args.k)],
                capture_output=True, text=True, check=True,
            )
            got[impl].append(float(out.stdout.split()[-1]))
    floor = statistics.median(got["floor-handle"])
    print(f"W2-sliding, N = {args.n:,}, {args.k:,} pending, {args.rounds} rounds "
          f"(Python {sys.version.split()[0]})")
    for impl in IMPLS:
        ns = statistics.median(got[impl])
        print(f"{impl:18s} {ns:7.1f} ns  {ns / floor:5.2f}x floor-handle")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
