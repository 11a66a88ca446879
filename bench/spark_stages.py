"""Per-stage task time, JVM CPU and wall time of the SQL formulation and the replay.

Runs both pipelines of ``bench_replay.py`` (``--repeat`` times, alternating)
in one ``local[2]`` session with the Spark UI on, then prints every completed
stage of the last repetition from Spark's REST API: task time (the sum over
tasks, which on two cores is about twice the wall time of a busy stage), the
JVM's CPU time (Python workers not included), shuffle and output bytes, and
the stage's wall time.  This is where bench/README.md's "where the time goes"
figures come from.

Run: ``python bench/spark_stages.py [--trace DIR] [--repeat 3]`` (the trace
defaults to a 1,000,000-request one, generated on first use).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.request
from datetime import datetime
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "spark"))

from sql_oracle import sql_oracle  # noqa: E402


def _get(url: str) -> Any:
    with urllib.request.urlopen(url) as response:
        return json.load(response)


def _ts(value: str) -> datetime:
    return datetime.strptime(value.replace("GMT", ""), "%Y-%m-%dT%H:%M:%S.%f")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=None)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from tickwheel.spark import spark_session
    from tickwheel.spark._glue import replay_to
    from tickwheel.spark.trace import write_trace

    work = tempfile.mkdtemp(prefix="tickwheel-stages-")
    trace = args.trace or os.path.join(work, "trace")
    if not os.path.exists(trace):
        write_trace(trace, args.requests, 64, seed=1)
    spark = spark_session(
        "local[2]",
        "tickwheel-stages",
        ui=True,
        progress=False,
        shuffle_partitions=4,
        extra_conf={"spark.driver.memory": "2g"},
    )
    url = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId
    first_job = {}
    for _ in range(args.repeat):
        jobs = _get(
            f"{url}/api/v1/applications/{spark.sparkContext.applicationId}/jobs"
        )
        first_job["sql"] = max((j["jobId"] for j in jobs), default=-1) + 1
        sql_oracle(spark.read.parquet(trace)).write.mode("overwrite").parquet(
            os.path.join(work, "sql")
        )
        jobs = _get(
            f"{url}/api/v1/applications/{spark.sparkContext.applicationId}/jobs"
        )
        first_job["replay"] = max(j["jobId"] for j in jobs) + 1
        replay_to(spark.read.parquet(trace), os.path.join(work, "replay"))
    jobs = _get(f"{url}/api/v1/applications/{app}/jobs")
    stages = {s["stageId"]: s for s in _get(f"{url}/api/v1/applications/{app}/stages")}
    print(f"{'pipeline':8} {'stage':>5} {'tasks':>5} {'task s':>7} {'JVM CPU s':>9} "
          f"{'wall s':>6}  name")  # fmt: skip
    for job in sorted(jobs, key=lambda j: j["jobId"]):
        if job["jobId"] < first_job["sql"]:
            continue
        pipeline = "sql" if job["jobId"] < first_job["replay"] else "replay"
        for sid in job["stageIds"]:
            s = stages.get(sid)
            if s is None or s["status"] != "COMPLETE":
                continue
            wall = (_ts(s["completionTime"]) - _ts(s["submissionTime"])).total_seconds()
            print(
                f"{pipeline:8} {sid:5d} {s['numTasks']:5d} "
                f"{s['executorRunTime'] / 1000:7.2f} {s['executorCpuTime'] / 1e9:9.2f} "
                f"{wall:6.2f}  {s['name'][:50]}"
            )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
