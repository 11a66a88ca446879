"""An independent oracle: the fixed-ISR replay as pure Spark SQL window functions.

No tickwheel code is used.  With a fixed ISR the high watermark (HW) of a
partition is the minimum, over its followers, of each follower's running
maximum fetch offset (0 before its first fetch); it never decreases.  So:

1. number the followers of each partition 0..K-1 (the replicas in its fetches);
2. one window per follower slot, ordered by (ts_ms, kind) - fetches first at a
   tie - gives that follower's running LEO at every row; their ``least`` is
   the running HW after each fetch;
3. a second window, ordered by offset *descending* over fetch rows keyed by
   their HW and produce rows keyed by their ``required_offset`` (fetches first
   at a tie), gives for each produce the earliest fetch whose HW reached its
   offset: the first time the HW reached it, because the HW is monotone;
4. that time, compared with the arrival and the deadline, is the outcome: at
   or before the arrival - completed at the arrival; strictly before the
   deadline - completed then; otherwise (or never) expired at the deadline.
   A partition without followers completes everything at arrival.

Used by the Spark tests (identical outcomes to the replay on 100,000
requests) and by ``bench/bench_replay.py`` (the SQL formulation to beat).
"""

from __future__ import annotations

from typing import Any

from tickwheel.spark._collect import collect

OUTCOME_COLUMNS = [
    "request_id",
    "partition",
    "arrival_ms",
    "deadline_ms",
    "outcome",
    "done_ms",
    "latency_ms",
]


def sql_oracle(events: Any) -> Any:
    """Outcomes of the fixed-ISR replay of a clean ``events`` DataFrame, by SQL only."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    fetches = events.where(F.col("kind") == "fetch")
    followers = (
        fetches.select("partition", "replica")
        .distinct()
        .withColumn(
            "slot",
            F.dense_rank().over(Window.partitionBy("partition").orderBy("replica")) - 1,
        )
    )
    counts = followers.groupBy("partition").agg(F.count("*").alias("n_followers"))
    # collect(), not first(): first() leaves pyspark < 4.2's socket to the GC.
    slots = int(collect(counts.agg(F.max("n_followers")))[0][0] or 0)

    ev = (
        events.join(F.broadcast(followers), ["partition", "replica"], "left")
        .join(F.broadcast(counts), ["partition"], "left")
        .withColumn("n_followers", F.coalesce("n_followers", F.lit(0)))
        .withColumn("is_produce", (F.col("kind") == "produce").cast("int"))
    )
    by_time = (
        Window.partitionBy("partition")
        .orderBy("ts_ms", "is_produce")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    big = F.lit(2**62)
    leos = [
        F.when(
            F.lit(k) < F.col("n_followers"),
            F.coalesce(
                F.max(F.when(F.col("slot") == k, F.col("fetch_offset"))).over(by_time),
                F.lit(0),
            ),
        ).otherwise(big)
        for k in range(slots)
    ]
    hw = F.least(*leos, big) if slots else big
    ev = ev.withColumn("hw", F.when(F.col("is_produce") == 0, hw))
    key = F.when(F.col("is_produce") == 1, F.col("required_offset")).otherwise(
        F.col("hw")
    )
    by_offset = (
        Window.partitionBy("partition")
        .orderBy(key.desc(), F.col("is_produce"))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    first = F.min(F.when(F.col("is_produce") == 0, F.col("ts_ms"))).over(by_offset)
    produces = ev.withColumn("first_ms", first).where(F.col("is_produce") == 1)
    arrival = F.col("ts_ms")
    deadline = F.col("ts_ms") + F.col("timeout_ms")
    at_once = (F.col("n_followers") == 0) | (F.col("first_ms") <= arrival)
    in_time = F.col("first_ms") < deadline
    done = F.when(at_once, arrival).when(in_time, F.col("first_ms")).otherwise(deadline)
    return produces.select(
        "request_id",
        "partition",
        arrival.alias("arrival_ms"),
        deadline.alias("deadline_ms"),
        F.when(at_once | in_time, F.lit("completed"))
        .otherwise(F.lit("expired"))
        .alias("outcome"),
        done.alias("done_ms"),
        (done - arrival).alias("latency_ms"),
    )
