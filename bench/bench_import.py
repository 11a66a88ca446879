"""Import speed of ``tickwheel import-request-log`` on Spark ``local[2]``, beside
the plainest Spark pipeline over the same lines and one plain Python process.

Workload: request-log lines from ``tests/spark/request_log_gen.py`` (produce
v9-v13 with multi-partition requests, follower fetches v12-v17, consumers,
other APIs, garbage lines).  Generating a million lines in Python takes
minutes, so one broker's log is generated (``--requests``, about 2.9 lines
per request) and copied with its topics renamed, as the logs of several
brokers would be, until there are ``--lines`` lines (plain files, one per
copy).

Rows (all in one Spark session, after one small warm-up of each):

* ``tickwheel import-request-log``: :func:`run_import`, each run into a new
  OUTPUT (parse, count, write ``events/`` and ``skipped/``, summarize);
* ``plain Spark``: ``spark.read.text``, keep the request-log lines, take the
  JSON, ``from_json`` with the import's own line schema, select its fields,
  write Parquet: the floor any Spark import of these lines pays;
* ``plain Python``: one process, ``json.loads`` per request-log line,
  counting produce and fetch requests (no output).

The rows alternate within each round (the order flips every round), so
load from other users falls on both alike; the table gives medians and the
import's ratio to plain Spark, with the load average before and after.  It
also counts the Spark jobs of one import of the shipped sample
(``tests/data/request-sample.log.gz``), where fixed costs dominate.

Run: ``python bench/bench_import.py`` (1,022,859 lines, 3 rounds: several
minutes on a quiet 2-core machine), ``--quick`` (about 100,000 lines, one
round), ``--lines 10000000 --rows import`` for the scaling check.
"""

from __future__ import annotations

import argparse
import io
import json
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


ROWS = ("import", "spark", "python")
SAMPLE = os.path.join(HERE, "..", "tests", "data", "request-sample.log.gz")


def plain_spark(spark: object, logs: str, output: str) -> None:
    """The plainest Spark pipeline: read, keep request-log lines, parse, write."""
    from pyspark.sql import functions as F

    from tickwheel.spark.request_log import LINE_SCHEMA, _json_body

    value = F.col("value")
    is_request, body = _json_body(value)
    lines = spark.read.text(logs)  # type: ignore[attr-defined]
    j = F.from_json(body, LINE_SCHEMA, {"mode": "PERMISSIVE"}).alias("j")
    lines.where(is_request).select(j).select("j.*").write.parquet(output)


def plain_python(logs: str) -> dict[str, int]:
    """One process: ``json.loads`` per request-log line; requests by API key."""
    from tickwheel.spark.request_log import MARKER

    counts = {"produce": 0, "fetch": 0, "other": 0}
    names = {0: "produce", 1: "fetch"}
    for name in sorted(os.listdir(logs)):
        with open(os.path.join(logs, name), encoding="utf-8") as fh:
            for line in fh:
                at = line.find(MARKER)
                if at < 0:
                    continue
                body = line[at + len(MARKER) : line.rfind("}") + 1]
                try:
                    api = json.loads(body)["requestHeader"]["requestApiKey"]
                except (ValueError, KeyError, TypeError):
                    continue
                counts[names.get(api, "other")] += 1
    return counts


def count_jobs(spark: object, base: str) -> int:
    """Spark jobs of one import of the shipped sample."""
    from tickwheel.spark.request_log import run_import

    sc = spark.sparkContext  # type: ignore[attr-defined]
    sc.setJobGroup("bench-import-sample", "one import of the shipped sample")
    try:
        run_import(
            [SAMPLE], os.path.join(base, "sample"), spark=spark, out=io.StringIO()
        )
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup("bench-import-sample"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--rows",
        default=",".join(ROWS),
        help=f"which rows, comma-separated (default: {','.join(ROWS)})",
    )
    parser.add_argument(
        "--logs",
        default=None,
        help="the logs to read (default: generate them)",
    )
    parser.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="keep the first import's OUTPUT there, to compare it with another "
        "build's (row by row: git checkout 65a0ae3 -- "
        "bench/compare_import.py)",
    )
    args = parser.parse_args()
    if args.quick:
        args.lines, args.requests, args.repeat = 100_000, 20_000, 1
    rows = [r for r in args.rows.split(",") if r]
    if not rows or set(rows) - set(ROWS):
        parser.error(f"--rows {args.rows!r}: choose from {', '.join(ROWS)}")
    from tickwheel.spark import spark_session
    from tickwheel.spark.request_log import run_import

    base = tempfile.mkdtemp(prefix="bench-import-")
    load_before = os.getloadavg()
    walls: dict[str, list[float]] = {row: [] for row in rows}
    stages = []
    try:
        logs = args.logs
        if logs is None:
            t0 = time.perf_counter()
            logs = os.path.join(base, "logs")
            write_logs(logs, args.lines, args.requests)
            print(f"generated the logs in {time.perf_counter() - t0:.0f} s")
        n = 0
        for name in os.listdir(logs):
            with open(os.path.join(logs, name), "rb") as fh:
                n += sum(1 for _ in fh)
        small = os.path.join(base, "small")
        os.makedirs(small)
        first = sorted(os.listdir(logs))[0]
        with open(os.path.join(logs, first)) as src:
            with open(os.path.join(small, first), "w") as dst:
                dst.writelines(line for _, line in zip(range(20_000), src))
        spark = spark_session("local[2]", "bench-import", ui=False, progress=False)
        run_import([small], os.path.join(base, "warm"), spark=spark, out=io.StringIO())
        plain_spark(spark, small, os.path.join(base, "warm-plain"))
        jobs = count_jobs(spark, base)

        def run(row: str, i: int) -> None:
            start = time.perf_counter()
            if row == "import":
                out = io.StringIO()
                run_import([logs], os.path.join(base, f"out{i}"), spark=spark, out=out)
                stages.append(re.findall(r"\] done in ([\d.]+) s", out.getvalue()))
            elif row == "spark":
                plain_spark(spark, logs, os.path.join(base, f"plain{i}"))
            else:
                plain_python(logs)
            walls[row].append(time.perf_counter() - start)
            if row == "import" and args.keep and not os.path.exists(args.keep):
                shutil.move(os.path.join(base, f"out{i}"), args.keep)
            shutil.rmtree(os.path.join(base, f"out{i}"), ignore_errors=True)
            shutil.rmtree(os.path.join(base, f"plain{i}"), ignore_errors=True)
            print(f"round {i + 1} {row}: {walls[row][-1]:.1f} s", flush=True)

        for i in range(args.repeat):
            for row in rows if i % 2 == 0 else rows[::-1]:
                run(row, i)
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load_after = os.getloadavg()
    print()
    print(
        f"tickwheel {tickwheel.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Spark local[2]; "
        f"{n:,} lines, {args.repeat} rounds; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    labels = {
        "import": "`tickwheel import-request-log`",
        "spark": "plain Spark (read, parse, write Parquet)",
        "python": "plain Python (`json.loads` per line, count)",
    }
    floor = statistics.median(walls["spark"]) if "spark" in walls else None
    print("| pipeline | median wall (s) | runs (s) | lines/s | / plain Spark |")
    print("|---|---:|---|---:|---:|")
    for row in rows:
        wall = statistics.median(walls[row])
        ratio = f"{wall / floor:.2f}x" if floor else ""
        runs = " / ".join(f"{w:.1f}" for w in walls[row])
        print(f"| {labels[row]} | {wall:.1f} | {runs} | {n / wall:,.0f} | {ratio} |")
    if stages:
        print(
            "import stages (s, each run): read+parse+events/ / skipped/ / summary: "
            + "; ".join(" / ".join(s[1:]) for s in stages)
        )
    print(f"Spark jobs of one import of the shipped sample: {jobs}")


if __name__ == "__main__":
    main()
