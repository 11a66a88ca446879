"""Import Kafka's request log into the replay's events table, on Spark.

Why
---
``tickwheel replay`` reads an events table (produce requests and follower
fetches).  A broker with ``kafka.request.logger`` at DEBUG already writes
everything that table needs, one line per request, and more: its own
measurement of how long each request waited in the purgatory
(``remoteTimeMs``).  Importing that log lets the replay answer questions
about a real incident, and lets it be checked against the broker
(:mod:`tickwheel.spark.broker_compare`).

A line (log4j ``[%d] %p %m (%c)%n``; Kafka's ``RequestChannel`` and
``RequestConvertToJson.requestDescMetrics``)::

    [2025-03-01 12:00:00,123] DEBUG Completed request:{"requestHeader":
    {"requestApiKey":0,"requestApiVersion":9,"correlationId":7,"clientId":"p-1",
    "requestApiKeyName":"PRODUCE"},"request":{"acks":-1,"timeoutMs":30000,
    "topicData":[{"name":"orders","partitionData":[{"index":3,
    "recordsSizeInBytes":512}]}]},"response":{"responses":[{"name":"orders",
    "partitionResponses":[{"index":3,"errorCode":0,"baseOffset":41}]}]},
    "connection":"...","totalTimeMs":5.2,"requestQueueTimeMs":0.1,
    "localTimeMs":0.3,"remoteTimeMs":4.5,...} (kafka.request.logger)

How each column is derived (docs/pipeline.md says why):

* **event time**: the line's timestamp is when the response was sent
  (``totalTimeMs`` after the request arrived).  A produce enters the
  purgatory, and a follower's fetch moves its log end offset, at the end of
  the request's local time: ``completed - totalTimeMs + requestQueueTimeMs +
  localTimeMs``, computed in whole microseconds and rounded *up* to the ms
  (the timestamp is truncated to the ms, so the instant lies in
  ``[t, t + 1 ms)`` of the estimate ``t``; the one whole ms there is it).
* **required_offset** of an ``acks=-1`` append is its end offset, the next
  append's ``baseOffset`` on that partition (appends are contiguous).  An
  append with no later one is skipped, not guessed.
* only ``acks=-1`` partitions with error 0 or 7 (REQUEST_TIMED_OUT) waited in
  the purgatory; every other produce partition is skipped with its reason.
* one row per partition; ``log_request_id`` ties the rows of one request,
  ``request_partitions`` says how many rows it has in all.

Everything runs in Spark SQL (``spark.read.text``, ``from_json`` with an
explicit schema, higher-order functions over the nested arrays): no Python
loop over lines.

This module runs the import; each step has a module of its own:
``_log_inputs`` (the files and topic ids, checked before Spark starts),
``_log_schema`` (the columns read and written), ``_log_parse`` (one row per
line), ``_log_rows`` (the rows of ``events/`` and ``skipped/``) and
``_log_summary`` (the counts).

>>> parse_topic_ids('{"AAAAAAAAAAAAAAAAAAAAAQ": "payments"}')
{'AAAAAAAAAAAAAAAAAAAAAQ': 'payments'}
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

# Each step has a module of its own; the CLI and the tests also import
# from here what they always have (noqa F401: re-exported, not used here).
from ._log_inputs import (  # noqa: F401
    HEAD_BYTES,
    HEAD_LINES,
    check_request_lines,
    find_logs,
    parse_topic_ids,
    read_topic_ids,
)
from ._log_parse import _json_body, _parse_lines, _topic_key  # noqa: F401
from ._log_rows import _import_rows, _split, import_frames  # noqa: F401
from ._log_schema import EVENT_EXTRA_COLUMNS, MARKER, SKIPPED_COLUMNS  # noqa: F401
from ._log_summary import (
    _count_groups,
    _line_counts,
    _table_counts,
    print_import_summary,
)
from .validate import ReplayUsageError

__all__ = [
    "EVENT_EXTRA_COLUMNS",
    "SKIPPED_COLUMNS",
    "check_request_lines",
    "find_logs",
    "import_frames",
    "parse_topic_ids",
    "read_topic_ids",
    "run_import",
]

TOOL = "tickwheel import-request-log"


#: Top-level entries an import writes (its manifest lists those it did).
IMPORT_ENTRIES = ("events", "skipped", "summary.json", "_SUCCESS")


def run_import(
    logs: Sequence[str],
    output: str,
    *,
    master: str = "local[*]",
    topic_ids: str | None = None,
    timezone: str = "UTC",
    overwrite: bool = False,
    spark: Any = None,
    out: TextIO | None = None,
    console: Any = None,
    conf: dict[str, str] | None = None,
    ui: bool = False,
) -> int:
    """Import request logs into OUTPUT/events and OUTPUT/skipped; return 0.

    OUTPUT follows ``tickwheel replay``'s rules: new or empty unless
    ``overwrite`` (which replaces only what an earlier import listed in its
    ``_SUCCESS``), written beside OUTPUT and moved into place at the end.

    :raises ReplayUsageError: (a ValueError) for bad arguments, or logs
        without a single request-log line
    """
    from .commit import commit, stage
    from .job import _Progress, _start_spark
    from .validate import check_java, check_master

    out = sys.stdout if out is None else out
    output, files, mapping = _check_import(
        logs, output, topic_ids, timezone, overwrite, out
    )
    if spark is None:
        check_master(master)
        check_java()
    progress = _Progress(4, out, label="import")
    progress.stage(f"starting Spark ({master})")
    if spark is None:
        spark = _start_spark(master, ui, conf or {}, console)
    progress.done(f"Spark {spark.version}")
    settings = {
        "logs": list(logs),
        "files": len(files),
        "topic_ids": topic_ids,
        "timezone": timezone,
    }
    target = stage(output)
    with _session_conf(spark, IMPORT_SQL_CONF):
        summary = _write_import(spark, files, mapping, target, progress, settings)
    commit(target, output, settings, tool=TOOL, entries=IMPORT_ENTRIES)
    print_import_summary(summary, out)
    print(
        f"total {time.perf_counter() - progress.started:.1f} s; events in "
        f"{os.path.join(output, 'events')} (replay: tickwheel replay {output} OUT)",
        file=out,
    )
    return 0


def _check_import(
    logs: Sequence[str],
    output: str,
    topic_ids: str | None,
    timezone: str,
    overwrite: bool,
    out: TextIO,
) -> tuple[str, list[str], dict[str, str]]:
    """Check the arguments before Spark starts: (OUTPUT, log files, topic ids)."""
    from .commit import recover
    from .validate import check_output, local_path

    output = local_path(output)
    if "://" in output:
        raise ReplayUsageError(
            f"OUTPUT {output!r}: the import writes to a local directory"
        )
    files = find_logs(logs)
    mapping = read_topic_ids(topic_ids) if topic_ids else {}
    _check_timezone(timezone)
    for line in recover(output):
        print(line, file=out)
    for path in files:
        if os.path.realpath(path).startswith(os.path.realpath(output) + os.sep):
            raise ReplayUsageError(f"OUTPUT {output!r} holds LOG file {path!r}")
    check_output(output, overwrite, tool=TOOL, entries=IMPORT_ENTRIES)
    check_request_lines(files, logs)
    return output, files, mapping


#: Input splits per core: more than one, so that files of about Spark's
#: 128 MB split size do not leave a core idle in the last wave (nine 125 MB
#: logs on two cores made nine tasks in five waves).
SPLITS_PER_CORE = 8


def _split_bytes(files: list[str], cores: int) -> int:
    """``spark.sql.files.maxPartitionBytes`` for reading ``files`` on
    ``cores``: about ``SPLITS_PER_CORE`` splits per core, 4-128 MB each."""
    total = sum(os.path.getsize(f) for f in files)
    return max(4 << 20, min(128 << 20, -(-total // (cores * SPLITS_PER_CORE))))


#: Spark SQL settings for the import's jobs.  HotSpot never JIT-compiles a
#: method over 8,000 bytes of bytecode, so a whole-stage-codegen method larger
#: than that runs interpreted; the parse stage's is (10 kB), and with this
#: limit (Spark's documented advice on HotSpot) Spark compiles that stage
#: operator by operator instead: 30 % less CPU.  Not set for the replay,
#: whose stages measured 5 % slower with it.  The persisted rows are kept
#: uncompressed: building Spark's compressed in-memory columns (dictionary
#: and run-length statistics per column) cost the import 6-20 % of its wall
#: time on the bench's million lines.
IMPORT_SQL_CONF = {
    "spark.sql.codegen.hugeMethodLimit": "8000",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}


@contextlib.contextmanager
def _session_conf(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL settings of ``spark`` for the block, then restore them."""
    conf = spark.conf
    before = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


# The plan, and why (the import at the plain parse-and-write's speed):
#
# 1. ``lines``: one row per input line, parsed once (``from_json``), slim:
#    the header fields, the times, and the produce or follower-fetch
#    partitions as small arrays; never the nested request and response
#    themselves.  The input is split by size (``_split_bytes``), not one
#    task per file.
# 2. ``rows`` (``_import_rows``): one branch over ``lines``, no union and no
#    filter-and-complement, each of which would run the parse again: one
#    explode gives every produce partition, follower-fetch partition and
#    unparseable line its row (and every other line one row, for the
#    counts), and one window over all of them gives each append its end
#    offset.
# 3. ``rows`` is persisted (uncompressed: Spark's in-memory compression cost
#    more CPU than it saved), and filled by the first write, ``events/``;
#    ``skipped/`` and the summary's counts (one small aggregate and one
#    distinct count) are read from it, never from what was just written.
# Measured in bench/README.md ("Importing a request log").
def _write_import(
    spark: Any,
    files: list[str],
    mapping: dict[str, str],
    target: str,
    progress: Any,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Write events/, skipped/ and summary.json under the staging ``target``.

    Returns the summary; on any error ``target`` is removed, so nothing
    half-written is ever committed.
    """
    import shutil

    from pyspark import StorageLevel

    from ._remote import default_parallelism

    rows = None
    try:
        progress.stage(f"reading {len(files)} file(s), writing events/")
        # See "the plan" above: one parse, one window, and every
        # row both outputs and the summary need, persisted by the first write.
        rows = _import_rows(
            _parse_lines(spark, files, settings["timezone"], _topic_key(mapping))
        ).persist(StorageLevel.MEMORY_AND_DISK_DESER)
        events, skipped = _split(rows)
        # The input is split when it is read, by this job.
        split = _split_bytes(files, default_parallelism(spark))
        with _session_conf(spark, {"spark.sql.files.maxPartitionBytes": str(split)}):
            events.write.parquet(os.path.join(target, "events"))
        progress.done()
        progress.stage("writing skipped/")
        skipped.write.parquet(os.path.join(target, "skipped"))
        progress.done()
        progress.stage("summarizing")
        groups = _count_groups(rows)
        counts = _line_counts(groups)
        if not counts["request_lines"]:
            raise ReplayUsageError(
                f"LOG {', '.join(settings['logs'])}: no request-log lines "
                f"('{MARKER}...') in {counts['lines']:,} lines; "
                "is kafka.request.logger at DEBUG?"
            )
        summary = {"lines": counts, **_table_counts(groups, events)}
        summary["settings"] = settings
        with open(os.path.join(target, "summary.json"), "w") as fh:
            json.dump(summary, fh, indent=2)
        progress.done(
            f"{counts['lines']:,} lines, {counts['request_lines']:,} requests"
        )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    finally:
        if rows is not None:
            rows.unpersist()
    return summary


def _check_timezone(timezone: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ReplayUsageError(
            f"--timezone {timezone!r} is not a time zone name (e.g. UTC, "
            "Europe/Berlin): the broker's log4j timestamps are in its local time"
        ) from None
