"""The Spark path: same answers as the single-process engine and as pure SQL."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

sys.path.insert(0, os.path.dirname(__file__))
from sql_oracle import OUTCOME_COLUMNS, sql_oracle  # noqa: E402

from tickwheel.spark import replay_table, resolve, resolve_all  # noqa: E402
from tickwheel.spark._collect import collect, leaves_socket_open  # noqa: E402
from tickwheel.spark.engine import OUTCOME_SCHEMA, REJECTED_SCHEMA, SIZE_SCHEMA  # noqa: E402
from tickwheel.spark.trace import generate_trace, malformed_rows  # noqa: E402

pytestmark = pytest.mark.spark


def to_arrow(df: Any, schema: Any) -> Any:
    """Collect a DataFrame as an Arrow table with ``schema``, in a canonical order."""
    table = pa.Table.from_pylist([r.asDict() for r in collect(df)], schema=schema)
    return table.sort_by([(c, "ascending") for c in schema.names])


def canonical(table: Any, schema: Any) -> Any:
    return (
        table.select(schema.names)
        .cast(schema)
        .sort_by([(c, "ascending") for c in schema.names])
    )


def test_spark_resolve_matches_single_process_with_sweep_isr_and_rejects(spark):
    table = generate_trace(4_000, 7, seed=3, rate_per_s=500.0)
    table = pa.concat_tables([table, malformed_rows(table, 15, seed=3)])
    kw = dict(timeout_ms=[30_000, 300], replica_lag_max_ms=1_500)
    local = replay_table(table, **kw)
    frames = resolve_all(spark.createDataFrame(table), **kw)
    try:
        assert to_arrow(frames.outcomes, OUTCOME_SCHEMA).equals(
            canonical(local.outcomes, OUTCOME_SCHEMA)
        )
        assert to_arrow(frames.purgatory_size, SIZE_SCHEMA).equals(
            canonical(local.purgatory_size, SIZE_SCHEMA)
        )
        spark_rejected = to_arrow(frames.rejected, REJECTED_SCHEMA)
        assert spark_rejected.equals(canonical(local.rejected, REJECTED_SCHEMA))
        assert spark_rejected.num_rows == 16
        assert local.outcomes.num_rows == 2 * (4_000 - 1)
    finally:
        frames.unpersist()


def test_spark_row_checks_match_the_engine_for_every_reason(spark):
    # Rows rejected by the glue and by the engine, against the single-process
    # run: the same reasons, the same precedence, including the range limits
    # and a duplicated id on a row with another fault.
    from tickwheel.spark.engine import MAX_TIME_MS
    from tickwheel.spark.trace import EVENT_SCHEMA

    def produce(ts: Any, rid: Any, offset: Any, timeout: Any) -> dict[str, Any]:
        return dict(
            ts_ms=ts,
            partition="p",
            kind="produce",
            request_id=rid,
            required_offset=offset,
            timeout_ms=timeout,
        )

    def fetch(ts: Any, replica: Any, offset: Any) -> dict[str, Any]:
        return dict(ts_ms=ts, partition="p", kind="fetch", replica=replica,
                    fetch_offset=offset)  # fmt: skip

    rows = [
        produce(0, 1, 5, 100),
        fetch(3, 1, 5),
        produce(MAX_TIME_MS + 1, 2, 5, 100),  # ts_ms out of range
        produce(-MAX_TIME_MS - 1, 3, 5, 100),  # ts_ms out of range
        produce(4, 4, -1, 100),  # negative required_offset
        produce(4, 5, 5, MAX_TIME_MS + 1),  # timeout_ms out of range
        produce(MAX_TIME_MS - 10, 6, 5, 11),  # timeout_ms out of range (sum)
        produce(MAX_TIME_MS - 10, 7, 5, 10),  # valid: deadline at the limit
        fetch(5, 2, -3),  # negative fetch_offset
        produce(6, 8, None, -1),  # null required_offset before negative timeout
        produce(7, 9, 5, -1),  # duplicate id with a negative timeout: duplicate
        produce(8, 9, 5, 100),
        dict(ts_ms=None, partition="p", kind="produce", request_id=None),
    ]
    table = pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)
    local = replay_table(table)
    frames = resolve_all(spark.createDataFrame(table))
    try:
        spark_rejected = to_arrow(frames.rejected, REJECTED_SCHEMA)
        assert spark_rejected.equals(canonical(local.rejected, REJECTED_SCHEMA))
        reasons = sorted(spark_rejected.column("reason").to_pylist())
        assert reasons == sorted(
            ["ts_ms out of range"] * 2
            + ["timeout_ms out of range"] * 2
            + ["duplicate request_id"] * 2
            + [
                "negative required_offset",
                "negative fetch_offset",
                "null required_offset",
                "null ts_ms",
            ]
        )
        assert to_arrow(frames.outcomes, OUTCOME_SCHEMA).equals(
            canonical(local.outcomes, OUTCOME_SCHEMA)
        )
        assert sorted(r["request_id"] for r in collect(frames.outcomes)) == [1, 7]
    finally:
        frames.unpersist()


def test_spark_resolve_returns_outcomes(spark):
    table = generate_trace(300, 2, seed=4)
    df = resolve(spark.createDataFrame(table))
    assert df.columns == OUTCOME_SCHEMA.names
    assert df.count() == 300


def test_spark_matches_sql_window_oracle_on_100k_requests(spark, tmp_path):
    path = str(tmp_path / "trace")
    from tickwheel.spark.trace import write_trace

    write_trace(path, 100_000, 16, seed=8)
    events = spark.read.parquet(path)
    frames = resolve_all(events)
    try:
        replay = frames.outcomes.select(*OUTCOME_COLUMNS)
        oracle = sql_oracle(events).select(*OUTCOME_COLUMNS)
        assert replay.count() == 100_000
        assert oracle.count() == 100_000
        assert replay.exceptAll(oracle).count() == 0
        assert oracle.exceptAll(replay).count() == 0
        expired = frames.outcomes.where("outcome = 'expired'").count()
        assert 0 < expired < 100_000  # the trace exercises both outcomes
    finally:
        frames.unpersist()


def test_spark_csv_values_that_do_not_cast_are_rejected_not_fatal(spark, tmp_path):
    path = tmp_path / "events.csv"
    path.write_text(
        "ts_ms,partition,kind,request_id,required_offset,timeout_ms,replica,fetch_offset\n"
        "0,p,produce,1,5,100,,\n"
        "3,p,fetch,,,,1,5\n"
        "abc,p,produce,2,5,100,,\n"
        "4,p,produce,3,5,ten,,\n"
    )
    from tickwheel.spark.job import read_events

    frames = resolve_all(read_events(spark, str(path)))
    try:
        rejected = sorted(
            (r["reason"], r["request_id"], r["raw"], r["ts_ms"])
            for r in collect(frames.rejected)
        )
        # raw: the text that failed, where the typed column is null.
        assert rejected == [
            ("invalid timeout_ms", 3, "ten", 4),
            ("invalid ts_ms", 2, "abc", None),
        ]
        assert [(r["request_id"], r["done_ms"]) for r in collect(frames.outcomes)] == [
            (1, 3)
        ]
    finally:
        frames.unpersist()


def test_collect_leaves_no_unclosed_socket(spark):
    """pyspark < 4.2 leaves collect()'s socket to the GC (SPARK-54247)."""
    import gc
    import warnings

    df = spark.range(3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        rows = collect(df)
        gc.collect()
    assert [r["id"] for r in rows] == [0, 1, 2]
    assert [str(w.message) for w in seen if w.category is ResourceWarning] == []
    # The guard is still needed where it is on: a bare collect() warns there.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        df.collect()
        gc.collect()
    warned = [w for w in seen if w.category is ResourceWarning]
    assert bool(warned) == leaves_socket_open(), [str(w.message) for w in warned]


def test_spark_missing_column_raises_naming_it(spark):
    df = spark.createDataFrame([(1, "p")], "ts_ms long, partition string")
    with pytest.raises(ValueError, match="missing column"):
        resolve_all(df)


def test_spark_job_writes_outputs_summary_and_plots(spark, tmp_path):
    from tickwheel.spark.job import run_replay
    from tickwheel.spark.trace import write_trace

    events = str(tmp_path / "events")
    write_trace(events, 2_000, 4, seed=9, malformed=4)
    out = tmp_path / "out"
    log = tmp_path / "log.txt"
    with open(log, "w") as fh:
        code = run_replay(
            events,
            str(out),
            timeout_ms=[30_000, 1_000],
            replica_lag_max_ms=5_000,
            out=fh,
            spark=spark,
        )
    assert code == 1  # malformed rows were rejected
    for name in ("outcomes", "purgatory_size", "rejected"):
        assert (out / name / "_SUCCESS").exists()
    assert (out / "latency_cdf.png").stat().st_size > 1000
    assert (out / "purgatory_size.png").stat().st_size > 1000
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(r["timeout_ms"] for r in summary["overall"]) == [1_000, 30_000]
    assert summary["rejected"] == {
        "unknown kind": 1,
        "null kind": 1,
        "null ts_ms": 1,
        "null partition": 1,
    }
    assert all(r["requests"] == 2_000 for r in summary["overall"])
    text = log.read_text()
    for k in range(1, 7):
        assert f"[replay {k}/6]" in text
    assert "engine accelerated" in text or "engine pure Python" in text

    clean = tmp_path / "clean"
    write_trace(clean, 500, 2, seed=9)
    with open(log, "w") as fh:
        assert (
            run_replay(
                str(clean), str(tmp_path / "out2"), out=fh, spark=spark, plots=False
            )
            == 0
        )


def test_cli_replay_demo_and_gen_trace(spark, tmp_path, capsys):
    from tickwheel.cli import main

    out = tmp_path / "demo"
    code = main(
        [
            "replay",
            "--demo",
            str(out),
            "--requests",
            "800",
            "--partitions",
            "3",
            "--master",
            "local[2]",
            "--no-plots",
            "--timeout-ms",
            "30000,50",
            "--conf",
            "spark.sql.shuffle.partitions=3",
        ]
    )
    assert code == 0
    assert (out / "input").is_dir() and (out / "outcomes" / "_SUCCESS").exists()
    text = capsys.readouterr().out
    # --no-plots: no plotting stage, not "plotting ... (skipped)".
    assert "[replay 5/5] done" in text and "(all)" in text
    assert "plotting" not in text and "/6]" not in text
    # The README's command a second time just works: it replaces its own
    # results (the _SUCCESS manifest lists them) and keeps everything else.
    first = json.loads((out / "_SUCCESS").read_text())
    (out / "notes.txt").write_text("mine")
    (out / "summary.json").write_text("{}")  # listed in the manifest: replaced
    again = ["replay", "--demo", str(out), "--requests", "800", "--partitions", "3"]
    assert main([*again, "--no-plots"]) == 0
    assert "reusing the trace" in capsys.readouterr().out
    assert (out / "notes.txt").read_text() == "mine"
    assert "overall" in json.loads((out / "summary.json").read_text())
    second = json.loads((out / "_SUCCESS").read_text())
    assert second["written"] == first["written"] and "notes.txt" not in first["written"]
    assert not [n for n in os.listdir(tmp_path) if "staging" in n]

    trace = tmp_path / "trace"
    assert (
        main(
            [
                "gen-trace",
                str(trace),
                "--requests",
                "50",
                "--partitions",
                "2",
                "--malformed",
                "3",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "replay",
                str(trace),
                str(tmp_path / "o"),
                "--master",
                "local[2]",
                "--no-plots",
            ]
        )
        == 1
    )  # the malformed rows
    assert main(["replay", str(tmp_path / "nope"), str(tmp_path / "o2")]) == 2
    with pytest.raises(SystemExit):
        main(["replay", "--timeout-ms", "x,y", str(trace), str(tmp_path / "o3")])
    with pytest.raises(SystemExit):
        main(["replay", "--conf", "novalue", str(trace), str(tmp_path / "o4")])


def test_spark_replay_to_rejects_every_copy_of_a_duplicate_id(spark, tmp_path):
    from tickwheel.spark._glue import replay_to

    table = generate_trace(600, 6, seed=12)
    produces = table.filter(pa.compute.equal(table["kind"], "produce"))
    first, other = (
        produces.slice(0, 1),
        produces.filter(
            pa.compute.not_equal(produces["partition"], produces["partition"][0])
        ).slice(0, 1),
    )
    # Give a request of another partition the first request's id.
    dup = other.set_column(3, "request_id", first.column("request_id"))
    table = pa.concat_tables([table, dup])
    out = str(tmp_path / "out")
    meta = replay_to(spark.createDataFrame(table), out)
    assert sum(m["events"] for m in meta) == table.num_rows - 2
    rejected = collect(spark.read.parquet(out + "/rejected"))
    assert sorted(r["reason"] for r in rejected) == ["duplicate request_id"] * 2
    local = replay_table(table)
    got = to_arrow(spark.read.parquet(out + "/outcomes"), OUTCOME_SCHEMA)
    assert got.equals(canonical(local.outcomes, OUTCOME_SCHEMA))
    assert not os.path.exists(out + "/union-staging")


def test_summary_percentiles_are_nearest_rank(spark):
    """p50 of {0, 10} ms is 0 (a latency a request had), not 5."""
    from tickwheel.spark.job import summarize

    rows = [(1, "p", "completed", 0), (2, "p", "completed", 10)]
    rows += [(3, "p", "expired", 500), (4, "q", "expired", 500)]
    outcomes = spark.createDataFrame(
        [(i, part, out, lat, None) for i, part, out, lat in rows],
        "request_id long, partition string, outcome string, latency_ms long, "
        "timeout_ms long",
    )
    summary = summarize(outcomes, {})
    (overall,) = summary["overall"]
    assert overall["latency_ms"] == {"p50": 0, "p95": 10, "p99": 10, "max": 10}
    by_name = {r["partition"]: r for r in summary["per_partition"]}
    assert by_name["q"]["latency_ms"]["p50"] is None  # nothing completed
