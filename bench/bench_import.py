"""Import speed of ``tickwheel import-request-log`` on Spark ``local[2]``: lines/s.

Workload: request-log lines from ``tests/spark/request_log_gen.py`` (produce
v9-v13 with multi-partition requests, follower fetches v12-v17, consumers,
other APIs, garbage lines).  Generating a million lines in Python takes
minutes, so one broker's log is generated (``--requests``, about 2.9 lines
per request) and copied with its topics renamed, as the logs of several
brokers would be, until there are ``--lines`` lines (plain files, one per
copy).

Measured in one Spark session: one small warm-up import (the session's first
jobs pay for JIT and code generation), then ``--repeat`` full imports, each
into a new OUTPUT; the median wall time gives lines/s, and the stage times
come from the progress lines.

Run: ``python bench/bench_import.py`` (1,000,000 lines: a few minutes),
``--quick`` (about 100,000 lines).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "spark"))

from request_log_gen import TOPIC_IDS, generate  # noqa: E402

import tickwheel  # noqa: E402


def write_logs(directory: str, lines: int, requests: int) -> int:
    """Write about ``lines`` request-log lines under ``directory``; return the count."""
    log = generate(requests, 32, seed=11)
    os.makedirs(directory, exist_ok=True)
    written = copy = 0
    while written < lines:
        new_id = f"{copy:04d}" + TOPIC_IDS["payments"][4:]
        with open(os.path.join(directory, f"broker-{copy}.log"), "w") as fh:
            for line in log.lines:
                fh.write(
                    line.replace('"orders"', f'"orders{copy}"').replace(
                        TOPIC_IDS["payments"], new_id
                    )
                    + "\n"
                )
        written += len(log.lines)
        copy += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.lines, args.requests, args.repeat = 100_000, 20_000, 1
    from tickwheel.spark import spark_session
    from tickwheel.spark.request_log import run_import

    base = tempfile.mkdtemp(prefix="bench-import-")
    try:
        t0 = time.perf_counter()
        n = write_logs(os.path.join(base, "logs"), args.lines, args.requests)
        print(f"generated {n:,} lines in {time.perf_counter() - t0:.0f} s")
        small = os.path.join(base, "small")
        os.makedirs(small)
        shutil.copy(os.path.join(base, "logs", "broker-0.log"), small)
        spark = spark_session("local[2]", "bench-import", ui=False, progress=False)
        run_import([small], os.path.join(base, "warm"), spark=spark, out=io.StringIO())
        walls, stages = [], []
        for i in range(args.repeat):
            out = io.StringIO()
            start = time.perf_counter()
            run_import(
                [os.path.join(base, "logs")],
                os.path.join(base, f"out{i}"),
                spark=spark,
                out=out,
            )
            walls.append(time.perf_counter() - start)
            stages.append(re.findall(r"\] done in ([\d.]+) s", out.getvalue()))
            print(f"run {i + 1}: {walls[-1]:.1f} s, stages {stages[-1]} s")
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    wall = statistics.median(walls)
    print()
    print(
        f"tickwheel {tickwheel.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Spark local[2]"
    )
    print(
        "| lines | runs | median wall (s) | lines/s "
        "| parse+count / write / summary (s) |"
    )
    print("|---|---|---|---|---|")
    mid = stages[walls.index(sorted(walls)[len(walls) // 2])]
    print(
        f"| {n:,} | {len(walls)} | {wall:.1f} | {n / wall:,.0f} | "
        f"{' / '.join(mid[1:])} |"
    )


if __name__ == "__main__":
    main()
