"""The replay engine without Spark: one hand-made trace per semantic rule.

Every trace is replayed with ``check=True``: each purgatory's ``_check()``
runs, nothing may be left pending, and the per-second purgatory sizes
computed from the operations' lifetimes must equal ``purgatory.delayed``
sampled during the replay.
"""

from __future__ import annotations

from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

pytestmark = pytest.mark.replay

from tickwheel.spark.engine import (  # noqa: E402
    OUTPUT_SCHEMA,
    REJECT_REASONS,
    purgatory_sizes,
    replay_table,
    resolve_batches,
    split_output,
)
from tickwheel.spark.trace import EVENT_SCHEMA, generate_trace, malformed_rows  # noqa: E402


def P(
    ts: int, rid: int, offset: int, timeout: int, partition: str = "p"
) -> dict[str, Any]:
    return dict(
        ts_ms=ts,
        partition=partition,
        kind="produce",
        request_id=rid,
        required_offset=offset,
        timeout_ms=timeout,
    )


def F(ts: int, replica: int, offset: int, partition: str = "p") -> dict[str, Any]:
    return dict(
        ts_ms=ts,
        partition=partition,
        kind="fetch",
        replica=replica,
        fetch_offset=offset,
    )


def run(rows: list[dict[str, Any]], **kw: Any) -> Any:
    return replay_table(
        pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), check=True, **kw
    )


def outcomes(rows: list[dict[str, Any]], **kw: Any) -> dict[Any, tuple[str, int]]:
    """request_id (or (request_id, timeout)) -> (outcome, done_ms)."""
    result = run(rows, **kw)
    sweep = isinstance(kw.get("timeout_ms"), list)
    out = {}
    for r in result.outcomes.to_pylist():
        key = (r["request_id"], r["timeout_ms"]) if sweep else r["request_id"]
        assert key not in out
        assert r["latency_ms"] == r["done_ms"] - r["arrival_ms"]
        assert r["deadline_ms"] == r["arrival_ms"] + r["timeout_ms"]
        out[key] = (r["outcome"], r["done_ms"])
    return out


# -- completion and expiry ----------------------------------------------------------
def test_replay_completes_when_every_follower_has_the_offset():
    rows = [P(0, 1, 10, 100), F(3, 1, 10), F(7, 2, 9), F(9, 2, 12)]
    assert outcomes(rows) == {1: ("completed", 9)}


def test_replay_expires_at_deadline_when_hw_never_reaches_offset():
    rows = [P(0, 1, 10, 50), F(3, 1, 10), F(7, 2, 9), F(200, 2, 9)]
    assert outcomes(rows) == {1: ("expired", 50)}


def test_replay_fetch_at_exactly_the_deadline_is_too_late():
    rows = [P(0, 1, 10, 50), F(3, 1, 10), F(50, 2, 10)]
    assert outcomes(rows) == {1: ("expired", 50)}
    rows = [P(0, 1, 10, 50), F(3, 1, 10), F(49, 2, 10)]
    assert outcomes(rows) == {1: ("completed", 49)}


def test_replay_already_satisfied_request_completes_at_arrival():
    rows = [F(1, 1, 20), F(2, 2, 25), P(5, 1, 20, 100), P(6, 2, 21, 100)]
    assert outcomes(rows) == {1: ("completed", 5), 2: ("expired", 106)}


def test_replay_fetch_applies_before_produce_at_the_same_ts():
    # Rows given produce-first: the replay's order puts the fetches first.
    rows = [P(5, 1, 8, 100), F(5, 1, 8), F(5, 2, 9)]
    result = run(rows)
    assert result.outcomes.to_pylist()[0]["done_ms"] == 5
    assert result.outcomes.to_pylist()[0]["latency_ms"] == 0


def test_replay_timeout_zero_completes_only_if_already_satisfied():
    rows = [F(1, 1, 5), P(2, 1, 5, 0), P(3, 2, 6, 0)]
    assert outcomes(rows) == {1: ("completed", 2), 2: ("expired", 3)}


def test_replay_partition_without_followers_completes_everything_at_arrival():
    rows = [
        P(0, 1, 10, 100, "solo"),
        P(4, 2, 20, 0, "solo"),
        P(1, 3, 5, 10, "q"),
        F(2, 7, 5, "q"),
    ]
    assert outcomes(rows) == {
        1: ("completed", 0),
        2: ("completed", 4),
        3: ("completed", 2),
    }


def test_replay_follower_leo_is_zero_until_its_first_fetch():
    # Follower 2's only fetch comes late: it holds the request back until then.
    rows = [F(0, 1, 0), P(1, 1, 3, 100), F(2, 1, 3), F(60, 2, 3)]
    assert outcomes(rows) == {1: ("completed", 60)}


def test_replay_end_of_log_runs_the_clock_on_to_every_deadline():
    rows = [F(0, 1, 0), P(10, 1, 5, 30_000), P(20, 2, 6, 500), P(21, 3, 7, 1_000_000)]
    got = outcomes(rows)
    assert got == {
        1: ("expired", 30_010),
        2: ("expired", 520),
        3: ("expired", 1_000_021),
    }


def test_replay_completion_order_does_not_matter_for_out_of_order_offsets():
    rows = [P(0, 1, 30, 100), P(1, 2, 10, 100), F(5, 1, 10), F(8, 1, 30)]
    assert outcomes(rows) == {1: ("completed", 8), 2: ("completed", 5)}


def test_replay_sweep_replays_every_timeout_in_one_pass():
    rows = [P(0, 1, 10, 999), F(3, 1, 5), F(40, 1, 10), P(50, 2, 11, 999), F(55, 1, 11)]
    got = outcomes(rows, timeout_ms=[10, 40, 100])
    assert got == {
        (1, 10): ("expired", 10),
        (1, 40): ("expired", 40),
        (1, 100): ("completed", 40),
        (2, 10): ("completed", 55),
        (2, 40): ("completed", 55),
        (2, 100): ("completed", 55),
    }


def test_replay_single_timeout_overrides_the_row_timeout():
    rows = [P(0, 1, 10, 5), F(20, 1, 10)]
    assert outcomes(rows, timeout_ms=30) == {1: ("completed", 20)}
    assert outcomes(rows) == {1: ("expired", 5)}


# -- ISR dynamics -------------------------------------------------------------------
def lagging_rows() -> list[dict[str, Any]]:
    # Follower 2 stops at 0; follower 1 keeps up.  Request 1 can only finish
    # by follower 2 leaving the ISR.
    return [F(0, 1, 0), F(0, 2, 0), P(10, 1, 5, 1_000), F(12, 1, 5)]


def test_replay_fixed_isr_waits_for_the_lagging_follower():
    assert outcomes(lagging_rows()) == {1: ("expired", 1_010)}


def test_replay_isr_shrink_after_replica_lag_max_completes_waiting_requests():
    # Follower 2 fell behind at t=10 (the produce), so it leaves the ISR at 110.
    assert outcomes(lagging_rows(), replica_lag_max_ms=100) == {1: ("completed", 110)}


def test_replay_isr_shrink_at_the_deadline_is_too_late():
    rows = lagging_rows()
    rows[2] = P(10, 1, 5, 100)
    assert outcomes(rows, replica_lag_max_ms=100) == {1: ("expired", 110)}
    rows[2] = P(10, 1, 5, 101)
    assert outcomes(rows, replica_lag_max_ms=100) == {1: ("completed", 110)}


def test_replay_lag_timer_in_a_bucket_that_starts_before_now():
    # The lag timer started at 1217 is due at 1517; nothing was due before,
    # so the wheel's levels still stand at 0 and it lands in a 400 ms bucket
    # that starts at 1200, before now.  The clock step must not take that
    # bucket's start for a time to move the clocks back to (it raised
    # "time_ms=1200 is before now_ms=1217").
    rows = [F(0, 1, 0), P(1_217, 1, 10, 5_000), F(1_300, 1, 10)]
    assert outcomes(rows, replica_lag_max_ms=300) == {1: ("completed", 1_300)}
    rows[-1] = F(1_600, 1, 10)  # too late: the follower left the ISR at 1517
    assert outcomes(rows, replica_lag_max_ms=300) == {1: ("completed", 1_517)}


def test_replay_a_fetch_that_catches_up_cancels_the_lag_timer():
    rows = lagging_rows() + [F(105, 2, 5), P(106, 2, 6, 1_000), F(107, 1, 6)]
    # Follower 2 caught up at 105 (< 110): it stays in the ISR; request 2
    # started its lag timer again at 106, so it leaves at 206.
    assert outcomes(rows, replica_lag_max_ms=100) == {
        1: ("completed", 105),
        2: ("completed", 206),
    }


def test_replay_follower_rejoins_the_isr_when_it_catches_up():
    rows = lagging_rows() + [
        F(300, 2, 5),  # caught up with the leader (LEO 5): rejoins
        P(400, 2, 9, 1_000),
        F(401, 1, 9),  # follower 2 is in the ISR again and holds request 2
        F(450, 2, 9),
    ]
    assert outcomes(rows, replica_lag_max_ms=100) == {
        1: ("completed", 110),
        2: ("completed", 450),
    }
    # Had it not rejoined, request 2 would have completed at 401.
    rows_no_rejoin = lagging_rows() + [P(400, 2, 9, 1_000), F(401, 1, 9), F(450, 2, 9)]
    assert outcomes(rows_no_rejoin, replica_lag_max_ms=100)[2] == ("completed", 401)


def test_replay_empty_isr_completes_requests_at_the_leader():
    rows = [F(0, 1, 0), P(10, 1, 5, 1_000)]
    assert outcomes(rows, replica_lag_max_ms=50) == {1: ("completed", 60)}


# -- purgatory size -------------------------------------------------------------------
def test_purgatory_sizes_by_second():
    rows = [
        P(0, 1, 10, 5_000),
        P(500, 2, 11, 5_000),
        F(1_200, 1, 10),
        F(1_300, 2, 10),
        P(1_400, 3, 1, 5),
    ]
    size = run(rows).purgatory_size.to_pylist()
    assert [
        (
            r["window_start_ms"],
            r["pending_end"],
            r["pending_max"],
            r["arrivals"],
            r["completed"],
            r["expired"],
        )
        for r in size
    ] == [
        (0, 2, 2, 2, 0, 0),
        (1_000, 1, 2, 1, 2, 0),  # request 1 completes at 1300, request 3 at once
        (2_000, 1, 1, 0, 0, 0),
        (3_000, 1, 1, 0, 0, 0),
        (4_000, 1, 1, 0, 0, 0),
        (5_000, 0, 1, 0, 0, 1),  # request 2 expires at 5500
    ]


def test_purgatory_sizes_leave_before_arrive_within_one_ms():
    s = purgatory_sizes(np.array([0, 10]), np.array([10, 20]), np.array([True, False]))
    assert s["pending_max"].tolist() == [1]


def test_replay_check_mode_on_a_generated_trace_with_sweep_and_isr():
    table = generate_trace(3_000, 6, seed=11, rate_per_s=400.0)
    result = replay_table(table, [5_000, 200], replica_lag_max_ms=2_000, check=True)
    assert result.outcomes.num_rows == 6_000
    assert result.rejected.num_rows == 0


# -- rejected rows --------------------------------------------------------------------
def test_replay_rejects_every_malformed_row_with_its_reason():
    good = [P(0, 1, 10, 100), F(5, 1, 10)]
    bad = [
        dict(P(1, 10, 1, 1), kind="commit"),
        dict(P(1, 11, 1, 1), kind=None),
        dict(P(1, 12, 1, 1), ts_ms=None),
        dict(P(1, 13, 1, 1), partition=None),
        dict(P(1, 14, 1, 1), request_id=None),
        dict(P(1, 15, 1, 1), required_offset=None),
        dict(P(1, 16, 1, 1), timeout_ms=None),
        dict(P(1, 17, 1, 1), timeout_ms=-1),
        dict(P(1, 18, 1, 1), required_offset=-3),
        dict(P(1, 19, 1, 1), timeout_ms=2**62),
        dict(P(1, 20, 1, 1), ts_ms=2**62),
        dict(F(1, 1, 1), replica=None),
        dict(F(1, 1, 1), fetch_offset=None),
        dict(F(1, 1, 1), fetch_offset=-1),
        P(2, 21, 1, 1),
        P(3, 21, 2, 1, "other"),  # a duplicate: every copy is rejected
    ]
    result = run(good + bad)
    reasons = sorted(r["reason"] for r in result.rejected.to_pylist())
    assert reasons == sorted(
        [
            "unknown kind",
            "null kind",
            "null ts_ms",
            "null partition",
            "null request_id",
            "null required_offset",
            "null timeout_ms",
            "negative timeout_ms",
            "negative required_offset",
            "timeout_ms out of range",
            "ts_ms out of range",
            "null replica",
            "null fetch_offset",
            "negative fetch_offset",
            "duplicate request_id",
            "duplicate request_id",
        ]
    )
    assert set(reasons) == set(REJECT_REASONS)
    assert result.outcomes.to_pylist()[0]["done_ms"] == 5
    assert result.outcomes.num_rows == 1
    # Rejected rows keep their input values.
    by_id = {r["request_id"]: r for r in result.rejected.to_pylist()}
    assert (
        by_id[17]["timeout_ms"] == -1 and by_id[17]["reason"] == "negative timeout_ms"
    )


@pytest.mark.parametrize("ts", [-(2**63), -(2**62), 2**63 - 1])
def test_replay_rejects_ts_at_the_int64_extremes(ts):
    # -2**63 has no positive int64 counterpart: an abs() check would let it in.
    result = run([P(1, 1, 1, 1), dict(P(1, 2, 1, 1), ts_ms=ts)])
    assert [r["reason"] for r in result.rejected.to_pylist()] == ["ts_ms out of range"]
    assert result.outcomes.num_rows == 1


def test_replay_generated_malformed_rows_are_all_rejected():
    table = generate_trace(500, 3, seed=2)
    junk = malformed_rows(table, 22, seed=2)
    result = replay_table(pa.concat_tables([table, junk]), check=True)
    assert result.rejected.num_rows == 22 + 1  # the duplicate's original too
    assert result.outcomes.num_rows == 500 - 1 + 0


def test_resolve_batches_rejects_later_copies_of_an_id_it_has_seen():
    rows = [P(0, 1, 1, 10, "a"), P(0, 1, 1, 10, "b")]
    batch = pa.RecordBatch.from_pylist(rows, schema=EVENT_SCHEMA)
    result = split_output(resolve_batches([batch]))
    assert [r["partition"] for r in result.rejected.to_pylist()] == ["b"]
    assert result.outcomes.num_rows == 1


# -- input contract and settings ----------------------------------------------------
def test_resolve_batches_refuses_unsorted_input():
    batch = pa.RecordBatch.from_pylist(
        [P(5, 1, 1, 10), F(3, 1, 1)], schema=EVENT_SCHEMA
    )
    with pytest.raises(ValueError, match="not sorted by \\(ts_ms, kind\\)"):
        list(resolve_batches([batch]))
    batch = pa.RecordBatch.from_pylist(
        [P(5, 1, 1, 10), F(5, 1, 1)], schema=EVENT_SCHEMA
    )
    with pytest.raises(ValueError, match="not sorted"):
        list(resolve_batches([batch]))


def test_resolve_batches_refuses_a_partition_in_two_runs():
    rows = [P(0, 1, 1, 10, "a"), P(0, 2, 1, 10, "b"), P(1, 3, 1, 10, "a")]
    batches = [pa.RecordBatch.from_pylist([r], schema=EVENT_SCHEMA) for r in rows]
    with pytest.raises(ValueError, match="partition 'a' appears in two separate runs"):
        list(resolve_batches(batches))


def _sorted(table: Any, keys: list[str]) -> Any:
    import pyarrow.compute as pc

    return table.take(pc.sort_indices(table, [(k, "ascending") for k in keys]))


@pytest.mark.parametrize("timeout_ms", [None, [30_000, 2_000, 0]])
def test_resolve_batches_sorted_by_time_matches_sorted_by_partition(timeout_ms):
    """Time-ordered input with partitions interleaved (the Spark glue's sort)
    replays exactly as partition-ordered input, junk rows included."""
    table = generate_trace(3_000, 7, seed=5)
    junk = malformed_rows(table, 15, seed=5)
    table = pa.concat_tables([table, junk.cast(table.schema)])
    by_partition = _sorted(table, ["partition", "ts_ms", "kind"])
    by_time = _sorted(table, ["ts_ms", "kind"])
    assert by_time.column("partition") != by_partition.column("partition")
    expected = split_output(
        resolve_batches(by_partition.to_batches(max_chunksize=500), timeout_ms)
    )
    got = split_output(
        resolve_batches(
            by_time.to_batches(max_chunksize=500), timeout_ms, sorted_by="time"
        )
    )
    assert got.outcomes.num_rows == 3_000 * (1 if timeout_ms is None else 3)
    for name in ("outcomes", "purgatory_size", "rejected"):
        a, b = getattr(expected, name), getattr(got, name)
        keys = [c for c in a.column_names if c != "reason"]
        assert _sorted(a, keys).equals(_sorted(b, keys)), name


def test_resolve_batches_sorted_by_time_still_checks_each_partition_order():
    rows = [P(0, 1, 1, 10, "a"), P(1, 2, 1, 10, "b"), P(0, 3, 1, 10, "b")]
    batch = pa.RecordBatch.from_pylist(rows, schema=EVENT_SCHEMA)
    with pytest.raises(ValueError, match="partition 'b' are not sorted"):
        list(resolve_batches([batch], sorted_by="time"))
    rows = [P(0, 1, 1, 10, "a"), P(0, 2, 1, 10, "b"), P(1, 3, 1, 10, "a")]
    batch = pa.RecordBatch.from_pylist(rows, schema=EVENT_SCHEMA)
    result = split_output(resolve_batches([batch], sorted_by="time"))
    assert sorted(result.outcomes.column("request_id").to_pylist()) == [1, 2, 3]
    assert list(resolve_batches([], sorted_by="time"))[0]["record"][0].as_py() == "meta"


def test_resolve_batches_sorted_by_must_be_named():
    with pytest.raises(
        ValueError, match="sorted_by must be 'partition' or 'time', got 'ts'"
    ):
        list(resolve_batches([], sorted_by="ts"))


def test_replay_missing_column_is_named():
    table = pa.Table.from_pylist([P(0, 1, 1, 10)], schema=EVENT_SCHEMA).drop_columns(
        ["timeout_ms"]
    )
    with pytest.raises(ValueError, match="missing column\\(s\\) \\['timeout_ms'\\]"):
        replay_table(table)


def test_replay_casts_compatible_types():
    table = pa.Table.from_pylist([P(0, 1, 1, 10), F(4, 1, 1)], schema=EVENT_SCHEMA)
    table = table.set_column(0, "ts_ms", table.column("ts_ms").cast(pa.int32()))
    assert replay_table(table).outcomes.to_pylist()[0]["done_ms"] == 4


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"timeout_ms": -1}, ValueError, "timeout_ms must be in"),
        ({"timeout_ms": [5, 5]}, ValueError, "repeated"),
        ({"timeout_ms": []}, ValueError, "must not be empty"),
        ({"timeout_ms": "30"}, TypeError, "timeout_ms must be ints"),
        ({"replica_lag_max_ms": 0}, ValueError, "replica_lag_max_ms must be in"),
        ({"replica_lag_max_ms": 1.5}, TypeError, "replica_lag_max_ms must be an int"),
    ],
)
def test_replay_bad_settings_raise_naming_the_argument(kw, exc, match):
    table = pa.Table.from_pylist([P(0, 1, 1, 10)], schema=EVENT_SCHEMA)
    with pytest.raises(exc, match=match):
        replay_table(table, **kw)


def test_replay_does_not_depend_on_batch_boundaries():
    table = generate_trace(2_000, 5, seed=5, rate_per_s=300.0)
    a = replay_table(table, batch_rows=7)
    b = replay_table(table, batch_rows=1 << 20)
    key = [("partition", "ascending"), ("request_id", "ascending")]
    assert a.outcomes.sort_by(key).equals(b.outcomes.sort_by(key))
    assert a.purgatory_size.equals(b.purgatory_size)


def test_resolve_batches_yields_the_union_schema_and_one_meta_record():
    import tickwheel

    batches = list(resolve_batches([]))
    assert len(batches) == 1 and batches[0].schema == OUTPUT_SCHEMA
    assert len(OUTPUT_SCHEMA) <= 12
    meta = split_output(batches).workers
    assert meta[0]["accelerated"] is tickwheel.USE_EXTENSIONS
    assert meta[0]["events"] == 0


def test_union_rows_fill_only_their_own_kinds_columns():
    """No column carries another record kind's fields (no packing)."""
    from tickwheel.spark.engine import OUTCOME_SCHEMA, RECORD_SCHEMAS

    table = generate_trace(300, 3, seed=4)
    junk = malformed_rows(table, 10, seed=4)
    events = pa.concat_tables([table, junk]).sort_by(
        [("partition", "ascending"), ("ts_ms", "ascending"), ("kind", "ascending")]
    )
    union = pa.Table.from_batches(
        list(resolve_batches(events.to_batches(), report_ids=True)),
        schema=OUTPUT_SCHEMA,
    )
    kinds = set(union.column("record").to_pylist())
    assert kinds == {"outcome", "size", "rejected", "meta"}
    assert set(OUTPUT_SCHEMA.names) == {
        *OUTCOME_SCHEMA.names,
        *kinds - {"outcome"},
        "record",
    }
    for kind in kinds:
        rows = union.filter(pa.compute.equal(union.column("record"), kind))
        own = OUTCOME_SCHEMA.names if kind == "outcome" else [kind]
        for name in OUTPUT_SCHEMA.names:
            nulls = rows.column(name).null_count
            if name == "record":
                continue
            if name in own and name != "timeout_ms":
                assert nulls < rows.num_rows, (kind, name)
            elif name not in own:
                assert nulls == rows.num_rows, (kind, name)
        if kind != "outcome":
            fields = rows.column(kind).combine_chunks().type
            assert pa.schema(list(fields)).names == RECORD_SCHEMAS[kind].names


def test_cli_gen_trace_writes_parquet(tmp_path, capsys):
    import pyarrow.parquet as pq

    from tickwheel.cli import main

    out = tmp_path / "t"
    assert main(["gen-trace", str(out), "--requests", "120", "--partitions", "3"]) == 0
    table = pq.read_table(str(out))
    assert table.schema == EVENT_SCHEMA
    assert table.filter(pa.compute.equal(table["kind"], "produce")).num_rows == 120
    assert main(["gen-trace", str(out), "--requests", "1", "--partitions", "1"]) == 2
    assert "exists" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["gen-trace", str(tmp_path / "u"), "--requests", "0", "--partitions", "1"])
    with pytest.raises(SystemExit):
        main(["replay"])


def test_spark_package_is_not_imported_by_tickwheel():
    import subprocess
    import sys

    code = (
        "import sys, tickwheel, tickwheel.spark; "
        "assert 'pyspark' not in sys.modules, 'pyspark imported'; "
        "assert 'tickwheel.spark.engine' not in sys.modules; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
    code = (
        "import sys, tickwheel; "
        "assert 'tickwheel.spark' not in sys.modules; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize(
    "name",
    [
        "tickwheel.spark.engine",
        "tickwheel.spark._engine_checks",
        "tickwheel.spark._engine_sizes",
        "tickwheel.spark.trace",
    ],
)
def test_replay_module_doctests(name):
    import doctest
    import importlib

    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS
    )
    assert result.attempted > 0 and result.failed == 0


def test_resolve_batches_accepts_kind_as_a_code():
    rows = [F(0, 1, 0), P(1, 7, 3, 100), F(5, 1, 3), dict(F(6, 1, -1))]
    table = pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)
    codes = pa.array([0, 1, 0, 0], pa.int8())
    table = table.set_column(2, "kind", codes)
    result = split_output(resolve_batches(table.to_batches()))
    assert [(r["request_id"], r["done_ms"]) for r in result.outcomes.to_pylist()] == [
        (7, 5)
    ]
    assert [(r["kind"], r["reason"]) for r in result.rejected.to_pylist()] == [
        ("fetch", "negative fetch_offset")
    ]


def test_new_operation_matches_init_on_both_cores():
    # The replay loop makes its operations with _new_operation (no __init__
    # frame); they must start exactly as DelayedOperation.__init__ leaves them.
    import tickwheel._purgatory_py as twin
    from tickwheel import _impl, purgatory

    makers = [(purgatory._new_operation, purgatory.DelayedOperation)]
    if _impl.USE_EXTENSIONS:  # the compiled module's twin, in the same process
        makers.append((twin._new_operation, twin.DelayedOperation))
    for make, base in makers:

        class Op(base):  # type: ignore[misc, valid-type]
            __slots__ = ()

            def try_complete(self) -> bool:
                return False

        op, ref = make(Op, 250), Op(250)
        assert type(op) is Op and op.delay_ms == ref.delay_ms == 250
        for flag in ("_op_holder", "_op_done", "_op_withdrawn", "_op_expired",
                     "_op_submitted", "_op_retry", "_op_trylock"):  # fmt: skip
            assert getattr(op, flag) == getattr(ref, flag), flag
        assert op._op_lock is not ref._op_lock and not op._op_lock.locked()
        with pytest.raises(TypeError):
            make(int, 250)
        with pytest.raises((TypeError, ValueError)):
            make(Op, "soon")
        # Every kind of delay reads back as __init__ stores it (the compiled
        # maker has a fast path for ints in range), and one out of range
        # fails as __init__ does.
        from tickwheel import MAX_DELAY_MS

        for delay in (0, -3, 2.5, MAX_DELAY_MS, -MAX_DELAY_MS, True + 1):
            op, ref = make(Op, delay), Op(delay)
            assert op.delay_ms == ref.delay_ms and type(op.delay_ms) is type(
                ref.delay_ms
            ), delay
        for delay in (MAX_DELAY_MS + 1, -MAX_DELAY_MS - 1, 2**70):
            with pytest.raises(OverflowError) as made:
                make(Op, delay)
            with pytest.raises(OverflowError) as inited:
                Op(delay)
            assert str(made.value) == str(inited.value)


def test_pack_ids_round_trips_every_int64_and_is_small():
    from tickwheel.spark.engine import pack_ids, unpack_ids

    rng = np.random.default_rng(3)
    extremes = np.array([-(2**63), 2**63 - 1, 0, -1, 1], dtype=np.int64)
    for ids in (
        np.zeros(0, dtype=np.int64),
        extremes,
        rng.integers(-(2**63), 2**63 - 1, 1_000, dtype=np.int64),
        rng.permutation(np.arange(5, 100_005, dtype=np.int64)),
    ):
        got = unpack_ids(pack_ids(ids))
        assert got.dtype == np.int64 and np.array_equal(got, np.sort(ids))
    # What a task reports: a quarter of a million ids drawn from a million.
    ids = np.sort(rng.choice(1_000_000, 250_000, replace=False))
    assert len(pack_ids(ids)) < ids.nbytes / 4


def test_arrow_sort_indices_places_nulls_on_the_installed_pyarrow():
    # pyarrow < 25 takes only (name, order) keys and 25+ warns about the
    # SortOptions-wide null_placement (an error here): the shim must pick the
    # form the installed release wants (the extra accepts pyarrow 16 on).
    from tickwheel.spark import _arrow

    table = pa.table({"a": [1, None, 1, 0], "b": [2, 0, None, 5]})
    keys = [("a", "ascending"), ("b", "ascending")]
    assert _arrow.sort_indices(table, keys, "at_start").to_pylist() == [1, 3, 2, 0]
    assert _arrow.sort_indices(table, keys, "at_end").to_pylist() == [3, 0, 2, 1]
