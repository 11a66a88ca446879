"""W1 (schedule only) under callgrind: instructions per schedule, noise-free.

Runs the loop of ``bench/test_bench_wheel.py``'s W1 (``baselines.loop_add``:
schedule every delay, keep the handles, none fires) once, N iterations, on
one implementation.  Run it under callgrind at two sizes and difference the
totals: fixed costs (interpreter start, imports, generating the delays)
cancel, leaving instructions per schedule::

    for n in 100000 200000; do
      valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.w1.$n \\
        python bench/callgrind_w1.py $n tickwheel 2>&1 | grep refs
    done

``null`` is a timer whose schedule does nothing (the loop plus a trivial
call); ``none`` skips the loop (the delays alone, about a third of the
total): a timer's own cost ~= impl - none.
"""

from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from baselines import factories, loop_add  # noqa: E402
from callgrind_sliding import Null, _cb  # noqa: E402


def main() -> None:
    n, impl = int(sys.argv[1]), sys.argv[2]
    rnd = random.Random(5)
    delays = [rnd.randint(1, 30_000) for _ in range(n)]
    timer = Null() if impl in ("null", "none") else factories()[impl]()
    if impl == "none":
        return
    loop_add(timer.schedule, delays, _cb)


if __name__ == "__main__":
    main()
