"""``tickwheel import-request-log``: the import field by field, and replay vs broker.

The log comes from ``request_log_gen.generate``: a synthetic trace replayed
in this process (the reference), written as request-log lines whose
``remoteTimeMs`` and error codes are the reference's outcomes.  So:

* the import must give back, row for row and field for field, the events
  the generator says (times, partition keys, offsets, broker columns), and
  skip exactly what it says, with the same reasons;
* replaying the imported table must agree with the "broker" on every
  request, with a latency difference of exactly 0 ms: every instant in the
  log is a whole ms, and the importer's rounding (end of local time, up to
  the ms) recovers it exactly, so nothing is left to round.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tickwheel.spark._collect import collect
from tickwheel.spark.validate import ReplayUsageError

sys.path.insert(0, os.path.dirname(__file__))
import hang_report  # noqa: E402
from request_log_gen import TOPIC_IDS, GeneratedLog, generate  # noqa: E402


@pytest.fixture(scope="module")
def imported(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[GeneratedLog, Path]:
    from tickwheel.spark.request_log import run_import

    base = tmp_path_factory.mktemp("reqlog")
    log = generate(500, 8, seed=3)
    log.write(str(base / "logs"))
    code = run_import([str(base / "logs")], str(base / "out"), spark=spark)
    assert code == 0
    return log, base / "out"


def _rows(spark: Any, path: Path) -> list[dict[str, Any]]:
    return [r.asDict() for r in collect(spark.read.parquet(str(path)))]


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["kind"], row["connection"], row["correlation_id"], row["partition"])


def test_import_frames_hold_the_written_rows(spark: Any, imported: Any) -> None:
    """``import_frames`` (the public DataFrames) holds the rows the import
    wrote, and one parsed row per line.  The ids are left out: they follow
    how the input is split, which the import sets and this call does not."""
    from tickwheel.spark.request_log import find_logs, import_frames

    _, out = imported
    events, skipped, lines = import_frames(spark, find_logs([str(out.parent / "logs")]))

    def rows(frame: Any) -> Counter[tuple[Any, ...]]:
        names = [n for n in frame.columns if n not in ("request_id", "log_request_id")]
        return Counter(tuple(r[n] for n in names) for r in collect(frame))

    assert rows(events) == rows(spark.read.parquet(str(out / "events")))
    assert rows(skipped) == rows(spark.read.parquet(str(out / "skipped")))
    summary = json.loads((out / "summary.json").read_text())
    assert lines.count() == summary["lines"]["lines"]


def test_import_events_field_by_field(spark: Any, imported: Any) -> None:
    log, out = imported
    got = _rows(spark, out / "events")
    by_key = {_key(r): r for r in got}
    assert len(by_key) == len(got) == len(log.events)
    for want in log.events:
        connection, correlation = want["key"]
        row = by_key[(want["kind"], connection, correlation, want["partition"])]
        for name, value in want.items():
            if name != "key":
                assert row[name] == value, (name, want, row)
    # request_id: unique per produce row; log_request_id: one per request.
    produce = [r for r in got if r["kind"] == "produce"]
    assert len({r["request_id"] for r in produce}) == len(produce)
    assert all(r["request_id"] is None for r in got if r["kind"] == "fetch")
    per_request: dict[int, set[Any]] = {}
    for r in produce:
        per_request.setdefault(r["log_request_id"], set()).add(
            (r["connection"], r["correlation_id"])
        )
    assert all(len(keys) == 1 for keys in per_request.values())
    assert len(per_request) == len(
        {(r["connection"], r["correlation_id"]) for r in produce}
    )
    # The binding columns come first, with their types.
    from tickwheel.spark.trace import EVENT_SCHEMA

    fields = spark.read.parquet(str(out / "events")).schema.fields
    assert [f.name for f in fields[:8]] == EVENT_SCHEMA.names
    assert [f.dataType.simpleString() for f in fields[:8]] == [
        "bigint",
        "string",
        "string",
        "bigint",
        "bigint",
        "bigint",
        "int",
        "bigint",
    ]
    # Multi-partition requests and timed-out partitions are in there.
    assert any(r["request_partitions"] > 1 for r in produce)
    assert any(r["broker_error_code"] == 7 for r in produce)
    assert {r["api_version"] for r in produce} == set(range(9, 14))
    assert {r["api_version"] for r in got if r["kind"] == "fetch"} == set(range(12, 18))
    assert any(r["partition"].startswith(TOPIC_IDS["payments"]) for r in produce)


def test_import_skipped_reasons_and_summary(spark: Any, imported: Any) -> None:
    log, out = imported
    got = Counter(r["reason"] for r in _rows(spark, out / "skipped"))
    assert got == log.skipped
    summary = json.loads((out / "summary.json").read_text())
    lines = summary["lines"]
    assert lines["other_lines"] == log.counts["other lines"]
    assert lines["unparseable"] == log.counts["unparseable"]
    assert lines["lines"] == len(log.lines)
    assert lines["fetch_requests"] == {
        "follower": log.counts["follower fetches"],
        "consumer": log.counts["consumer fetches"],
    }
    assert lines["requests_by_api"]["METADATA"] == log.counts["METADATA"]
    assert Counter(summary["skipped"]) == log.skipped
    assert summary["events"]["partitions"] == 8
    assert summary["partitions_without_fetches"] == []
    manifest = json.loads((out / "_SUCCESS").read_text())
    assert manifest["tool"] == "tickwheel import-request-log"
    assert manifest["written"] == ["_SUCCESS", "events", "skipped", "summary.json"]


def test_replay_of_import_agrees_with_broker(
    spark: Any, imported: Any, tmp_path: Path
) -> None:
    from tickwheel.spark.job import run_replay

    log, out = imported
    replay_out = tmp_path / "replay"
    printed = io.StringIO()
    run_replay(str(out), str(replay_out), spark=spark, out=printed)
    summary = json.loads((replay_out / "summary.json").read_text())
    rb = summary["replay_vs_broker"]
    # Stage 6 names every plot it wrote; the table lists every partition.
    (done,) = [
        ln for ln in printed.getvalue().splitlines() if "[replay 6/6] done" in ln
    ]
    assert "latency_cdf.png" in done and "replay_vs_broker.png" in done, done
    assert len(rb["worst_partitions"]) == 8
    expired = sum(1 for e, _ in log.requests.values() if e)
    assert rb["requests"] == len(log.requests)
    rows: Counter[Any] = Counter(e["key"] for e in log.events if e["kind"] == "produce")
    parts = {e["key"]: e["request_partitions"] for e in log.events}
    assert rb["incomplete_requests"] == sum(1 for k in rows if rows[k] < parts[k])
    assert rb["agreement"] == 1.0
    assert rb["outcomes"]["both_expired"] == expired > 0
    assert rb["outcomes"]["both_completed"] == len(log.requests) - expired
    diff = rb["diff_ms"]
    assert diff["min"] == diff["max"] == 0.0
    assert diff["count"] == len(log.requests)
    assert all(w["agreement"] == 1.0 for w in rb["worst_partitions"])
    assert (replay_out / "replay_vs_broker.png").stat().st_size > 10_000
    manifest = json.loads((replay_out / "_SUCCESS").read_text())
    assert "replay_vs_broker.png" in manifest["written"]


def test_import_names_topics_by_id_with_a_mapping(spark: Any, tmp_path: Path) -> None:
    from tickwheel.spark.request_log import run_import

    log = generate(120, 4, seed=5, by_name=True)
    log.write(str(tmp_path / "logs"))
    ids = tmp_path / "ids.txt"
    ids.write_text(
        "".join(
            f"Topic: {name}\tTopicId: {tid}\tPartitionCount: 2\n"
            for name, tid in TOPIC_IDS.items()
        )
    )
    sink = io.StringIO()
    run_import(
        [str(tmp_path / "logs")],
        str(tmp_path / "out"),
        spark=spark,
        topic_ids=str(ids),
        out=sink,
    )
    got = {_key(r): r for r in _rows(spark, tmp_path / "out" / "events")}
    assert len(got) == len(log.events)
    for want in log.events:
        row = got[(want["kind"], *want["key"], want["partition"])]
        assert (row["ts_ms"], row["fetch_offset"], row["required_offset"]) == (
            want["ts_ms"],
            want["fetch_offset"],
            want["required_offset"],
        )
    # Without the mapping the same lines split each topic in two keys, and
    # the summary says which partitions have produces but no fetches.
    run_import([str(tmp_path / "logs")], str(tmp_path / "raw"), spark=spark, out=sink)
    summary = json.loads((tmp_path / "raw" / "summary.json").read_text())
    assert summary["partitions_without_fetches"]
    assert summary["events"]["partitions"] > 4


def test_import_restores_the_session_settings(spark: Any, tmp_path: Path) -> None:
    """The import sets its own SQL settings for its jobs and puts the
    caller's back: a value they had, and no value where they had none."""
    from tickwheel.spark.request_log import IMPORT_SQL_CONF, run_import

    generate(60, 4, seed=9).write(str(tmp_path / "logs"))
    assert IMPORT_SQL_CONF
    conf = spark.conf
    conf.set("spark.sql.files.maxPartitionBytes", "77m")
    assert all(conf.get(key, None) is None for key in IMPORT_SQL_CONF)
    try:
        run_import(
            [str(tmp_path / "logs")],
            str(tmp_path / "out"),
            spark=spark,
            out=io.StringIO(),
        )
        assert conf.get("spark.sql.files.maxPartitionBytes") == "77m"
        assert {key: conf.get(key, None) for key in IMPORT_SQL_CONF} == dict.fromkeys(
            IMPORT_SQL_CONF
        )
    finally:
        conf.unset("spark.sql.files.maxPartitionBytes")
    assert (tmp_path / "out" / "_SUCCESS").exists()


def test_json_body_cuts_on_bytes_from_the_first_marker_to_the_last_brace(
    spark: Any,
) -> None:
    """The cut is on bytes: characters of several bytes before or inside the
    JSON must not shift it; a second marker inside the JSON is content; no
    ``}`` at all leaves an empty body (from_json: null)."""
    from pyspark.sql import functions as F

    from tickwheel.spark.request_log import MARKER, _json_body

    cases = [
        (
            "[ü€] " + MARKER + '{"c": "é' + MARKER + '"} (kafka.request.logger)',
            '{"c": "é' + MARKER + '"}',
        ),
        (MARKER + '{"a": {"b": 1}}}} tail', '{"a": {"b": 1}}}}'),
        ("é" + MARKER + "{ no brace", ""),
        ("no marker {}", None),
    ]
    frame = spark.createDataFrame([(line,) for line, _ in cases], "value string")
    is_request, body = _json_body(F.col("value"))
    got = frame.select(is_request.alias("r"), body.alias("b")).collect()
    assert [(row.r, row.b) for row in got] == [
        (want is not None, want) for _, want in cases
    ]


def test_split_bytes_makes_several_splits_per_core(tmp_path: Path) -> None:
    from tickwheel.spark.request_log import SPLITS_PER_CORE, _split_bytes

    big = tmp_path / "big.log"
    with open(big, "wb") as fh:
        fh.truncate(1 << 30)  # sparse: 1 GiB, nothing written
    small = tmp_path / "small.log"
    small.write_bytes(b"x" * 1000)
    # 1 GiB on 2 cores: 64 MiB splits, SPLITS_PER_CORE per core.
    assert _split_bytes([str(big)], 2) == (1 << 30) // (2 * SPLITS_PER_CORE)
    # Never under 4 MiB (Spark's cost of opening a file), never over 128 MiB.
    assert _split_bytes([str(small)], 2) == 4 << 20
    assert _split_bytes([str(big)] * 40, 2) == 128 << 20


def test_import_refuses_logs_without_request_lines(spark: Any, tmp_path: Path) -> None:
    from tickwheel.spark.request_log import run_import

    log = tmp_path / "server.log"
    log.write_text("[2025-03-01 12:00:00,000] INFO started (kafka.Kafka)\n" * 3)
    with pytest.raises(ReplayUsageError, match="no request-log lines .* in 3 lines"):
        run_import([str(log)], str(tmp_path / "out"), spark=spark, out=io.StringIO())
    assert not (tmp_path / "out").exists()
    assert not [p for p in os.listdir(tmp_path) if "staging" in p]


def test_import_refuses_logs_whose_request_lines_do_not_parse(
    spark: Any, tmp_path: Path
) -> None:
    """The marker passes the check before Spark, but no line parses: Spark's
    count (after ``events/`` is written) refuses it, and the half-written
    staging directory goes with the error."""
    from tickwheel.spark.request_log import run_import

    log = tmp_path / "server.log"
    log.write_text(
        "[2025-03-01 12:00:00,000] DEBUG Completed request:{not json} "
        "(kafka.request.logger)\n" * 3
    )
    with pytest.raises(ReplayUsageError, match="no request-log lines .* in 3 lines"):
        run_import([str(log)], str(tmp_path / "out"), spark=spark, out=io.StringIO())
    assert not (tmp_path / "out").exists()
    assert not [p for p in os.listdir(tmp_path) if "staging" in p]


# -- bad input, before Spark (the command as a user meets it) -------------------------
def _cli(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    return hang_report.run(
        ["-m", "tickwheel", "import-request-log", *args], timeout=timeout
    )


@pytest.mark.parametrize(
    "make, expect",
    [
        (
            lambda d: ([str(d / "nope.log")], d / "out"),
            "LOG '.*nope.log' does not exist",
        ),
        (lambda d: ([str(d / "empty")], d / "out"), "is a directory without files"),
        (lambda d: ([str(d / "a.log")], d / "busy"), "OUTPUT '.*busy' is not empty"),
        (lambda d: ([str(d / "zipped")], d / "out"), "gzipped but not named .gz"),
    ],
    ids=["missing", "empty-dir", "output-exists", "gzip-suffix"],
)
def test_cli_bad_input_is_one_line(tmp_path: Path, make: Any, expect: str) -> None:
    import gzip
    import re

    (tmp_path / "empty").mkdir()
    (tmp_path / "a.log").write_text("x\n")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep me")
    (tmp_path / "zipped").write_bytes(gzip.compress(b"x\n"))
    logs, output = make(tmp_path)
    code, out, err = _cli(*logs, str(output))
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tickwheel import-request-log: ")
    assert re.search(expect, lines[0]), lines[0]
    assert "[import 1/4]" not in out
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep me"


def test_cli_refuses_a_log_without_request_lines_before_spark(tmp_path: Path) -> None:
    """The first lines are read before Spark starts: no JVM for a wrong file."""
    log = tmp_path / "server.log"
    log.write_text("[2025-03-01 12:00:00,000] INFO started (kafka.Kafka)\n" * 3)
    code, out, err = _cli(str(log), str(tmp_path / "out"), timeout=60)
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert (
        f"LOG {str(log)}: no request-log lines ('Completed request:...') in 3 lines"
        in err
    )
    assert "[import 1/4]" not in out and "starting Spark" not in out
    assert not (tmp_path / "out").exists()


def test_check_request_lines_reads_only_the_head(tmp_path: Path) -> None:
    import gzip

    from tickwheel.spark.request_log import HEAD_LINES, check_request_lines

    other = "[2025-03-01 12:00:00,000] INFO x (kafka.Kafka)\n"
    lines = generate(5, 1, seed=1).lines
    request = next(x for x in lines if "Completed request:{" in x) + "\n"
    late = tmp_path / "late.log"
    late.write_text(other * HEAD_LINES + request)
    with pytest.raises(ReplayUsageError, match="in the first 10,000 lines read;"):
        check_request_lines([str(late)], ["LATE"])
    # Any file with a request line in its head will do; gzipped files too.
    found = tmp_path / "found.log.gz"
    found.write_bytes(gzip.compress((other * (HEAD_LINES - 1) + request).encode()))
    check_request_lines([str(late), str(found)], ["LOGS"])
    # Several files without one: the lines of all are counted.
    with pytest.raises(ReplayUsageError, match=r"^LOG a, b: .* in 4 lines;"):
        (tmp_path / "a").write_text(other * 2)
        check_request_lines([str(tmp_path / "a")] * 2, ["a", "b"])


@pytest.mark.parametrize(
    "text, expect",
    [
        ("{not json", "not valid JSON"),
        ('{"id": 3}', "must map topic ids to topic names"),
        ("nothing here\n", "no topic ids in it"),
        (None, "cannot read it"),
    ],
)
def test_cli_bad_topic_ids(tmp_path: Path, text: str | None, expect: str) -> None:
    (tmp_path / "a.log").write_text("x\n")
    ids = tmp_path / "ids.json"
    if text is not None:
        ids.write_text(text)
    code, _, err = _cli(
        str(tmp_path / "a.log"), str(tmp_path / "out"), "--topic-ids", str(ids)
    )
    assert code == 2
    assert err.count("\n") == 1 and f"--topic-ids '{ids}'" in err and expect in err
    assert not (tmp_path / "out").exists()


SAMPLE = Path(__file__).parent.parent / "data" / "request-sample.log.gz"


def test_sample_log_is_the_generators() -> None:
    """tests/data/request-sample.log.gz is `request_log_gen.py --requests 300
    --partitions 6 --seed 7` (the README's example input)."""
    import gzip

    with gzip.open(SAMPLE, "rt", encoding="utf-8") as fh:
        shipped = fh.read().splitlines()
    assert shipped == generate(300, 6, seed=7).lines


def test_cli_imports_the_sample(tmp_path: Path) -> None:
    """The command as the README runs it, with a mapping and a time zone."""
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({TOPIC_IDS["payments"]: "payments"}))
    out = tmp_path / "imported"
    args = [str(SAMPLE), str(out), "--master", "local[2]", "--topic-ids", str(ids)]
    code, stdout, stderr = _cli(*args, "--timezone", "Europe/Berlin", timeout=900)
    assert code == 0, stderr
    assert stderr == ""
    assert "[import 4/4] done" in stdout and "skipped rows:" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["events"]["partitions"] == 6
    assert summary["partitions_without_fetches"] == []
    assert summary["lines"]["time_span"]["first"] == "2025-03-01T11:00:00.000Z"
    import pyarrow.parquet as pq

    events = pq.read_table(out / "events").to_pylist()
    want = {e["ts_ms"] - 3_600_000 for e in generate(300, 6, seed=7).events}
    assert {e["ts_ms"] for e in events} == want
    assert {e["partition"].rsplit("-", 1)[0] for e in events} == {"orders", "payments"}


def test_import_overwrite_replaces_only_its_own_files(
    spark: Any, tmp_path: Path
) -> None:
    """--overwrite follows the replay's policy: an earlier import's own entries
    are replaced, a file of the user's stays; without it, OUTPUT is refused."""
    from tickwheel.spark.request_log import run_import

    log = generate(60, 2, seed=9)
    log.write(str(tmp_path / "logs"))
    out = tmp_path / "out"
    run_import([str(tmp_path / "logs")], str(out), spark=spark, out=io.StringIO())
    (out / "notes.txt").write_text("mine")
    first = json.loads((out / "_SUCCESS").read_text())["finished"]
    with pytest.raises(ReplayUsageError, match="is not empty"):
        run_import([str(tmp_path / "logs")], str(out), spark=spark, out=io.StringIO())
    run_import(
        [str(tmp_path / "logs")],
        str(out),
        spark=spark,
        out=io.StringIO(),
        overwrite=True,
    )
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(os.listdir(out)) == [
        "_SUCCESS",
        "events",
        "notes.txt",
        "skipped",
        "summary.json",
    ]
    assert json.loads((out / "_SUCCESS").read_text())["finished"] >= first
    events = spark.read.parquet(str(out / "events")).count()
    assert events == len(log.events)
