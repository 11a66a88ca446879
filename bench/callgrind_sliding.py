"""W2-sliding under callgrind: instructions per iteration, noise-free.

Runs the sliding-window loop of ``bench/test_bench_wheel.py::test_w2_sliding``
(``baselines.loop_sliding``)
once, N iterations, on one implementation.  Run it under callgrind at two
sizes and difference the totals: fixed costs (interpreter start, imports,
generating the delays) cancel, leaving instructions per iteration::

    for impl in tickwheel heapq null none; do for n in 100000 200000; do
      valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$impl.$n \\
        python bench/callgrind_sliding.py $n $impl 2>&1 | grep refs
    done; done

``null`` is a timer whose calls do nothing (the loop plus two trivial calls);
``none`` skips the loop (the delays alone).  Then per iteration: loop ~=
null - none (minus two trivial calls); a timer's own cost ~= impl - null.
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from baselines import factories, loop_sliding  # noqa: E402


class Null:
    """schedule/cancel that do nothing: the loop's own cost."""

    @staticmethod
    def schedule(delay_ms: float, fn: Any) -> int:
        return 1

    @staticmethod
    def cancel(handle: Any) -> None:
        return None


def _cb() -> None:
    pass


def main() -> None:
    n, impl = int(sys.argv[1]), sys.argv[2]
    rnd = random.Random(5)
    delays = [rnd.randint(1, 30_000) for _ in range(n)]
    timer = Null() if impl in ("null", "none") else factories()[impl]()
    if impl == "none":
        return
    loop_sliding(timer.schedule, timer.cancel, delays, _cb, max(1, n // 10))


if __name__ == "__main__":
    main()
