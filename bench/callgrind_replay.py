"""The replay engine's compiled event loop under callgrind: instructions, noise-free.

Replays a generated trace (100,000 produce requests over 16 partitions, about
200,000 events) through :func:`tickwheel.spark.engine.resolve_batches`.
Collect only inside the compiled loop (``run_fixed_isr``), which excludes
interpreter start, trace generation and the numpy validation around it::

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.replay \\
      --toggle-collect='__pyx_pw_*_replay_*run_fixed_isr' \\
      python bench/callgrind_replay.py 2>&1 | grep Collected
    callgrind_annotate --inclusive=yes /tmp/cg.replay | head -60

Divide "Collected" by the request count for instructions per request.
"""

from __future__ import annotations

import sys

import pyarrow.compute as pc

from tickwheel.spark.engine import resolve_batches
from tickwheel.spark.trace import generate_trace


def main() -> None:
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    table = generate_trace(requests, 16, seed=1)
    table = table.take(
        pc.sort_indices(
            table,
            sort_keys=[
                ("partition", "ascending"),
                ("ts_ms", "ascending"),
                ("kind", "ascending"),
            ],
        )
    )
    rows = sum(b.num_rows for b in resolve_batches(table.to_batches(65_536)))
    print(f"{requests:,} requests, {table.num_rows:,} events, {rows:,} output rows")


if __name__ == "__main__":
    main()
