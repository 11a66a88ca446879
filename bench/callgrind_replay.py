"""The replay engine's compiled event loop under callgrind: instructions, noise-free.

Replays a generated trace (100,000 produce requests over 16 partitions) with
:func:`tickwheel.spark.engine.replay_table`.
Collect only inside the compiled loop (``_replay.run``), which excludes
interpreter start, trace generation and the numpy validation around it::

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.replay \\
      --toggle-collect='__pyx_pw_*_replay_*run' \\
      python bench/callgrind_replay.py 2>&1 | grep Collected
    callgrind_annotate --inclusive=yes /tmp/cg.replay | head -60

Divide "Collected" by the request count for instructions per request.
"""

from __future__ import annotations

import sys

from tickwheel.spark.engine import replay_table
from tickwheel.spark.trace import generate_trace


def main() -> None:
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    table = generate_trace(requests, 16, seed=1)
    # replay_table sorts and validates around the loop; callgrind counts
    # only inside _replay.run (--toggle-collect), so that is left out.
    result = replay_table(table)
    print(f"{requests:,} requests, {table.num_rows:,} events, "
          f"{result.outcomes.num_rows:,} outcomes")  # fmt: skip


if __name__ == "__main__":
    main()
