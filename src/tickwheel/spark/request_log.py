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

>>> parse_topic_ids('{"AAAAAAAAAAAAAAAAAAAAAQ": "payments"}')
{'AAAAAAAAAAAAAAAAAAAAAQ': 'payments'}
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from ._collect import collect
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
MARKER = "Completed request:"
#: Top-level entries an import writes (its manifest lists those it did).
IMPORT_ENTRIES = ("events", "skipped", "summary.json", "_SUCCESS")
REQUEST_TIMED_OUT = 7
UNPARSEABLE = "unparseable request-log line"

#: Columns the import adds to the binding events schema (the replay ignores
#: them; the replay-vs-broker comparison reads them).
EVENT_EXTRA_COLUMNS = {
    "log_request_id": "bigint",
    "request_partitions": "int",
    "remote_time_ms": "double",
    "broker_error_code": "int",
    "client_id": "string",
    "correlation_id": "int",
    "connection": "string",
    "api_version": "int",
}
#: The events table the import writes: the binding columns, then the extras.
EVENT_COLUMNS = {
    "ts_ms": "bigint",
    "partition": "string",
    "kind": "string",
    "request_id": "bigint",
    "required_offset": "bigint",
    "timeout_ms": "bigint",
    "replica": "int",
    "fetch_offset": "bigint",
    **EVENT_EXTRA_COLUMNS,
}
SKIPPED_COLUMNS = {
    "reason": "string",
    "api": "string",
    "completed_ms": "bigint",
    "connection": "string",
    "correlation_id": "int",
    "client_id": "string",
    "partition": "string",
    "line": "string",
}

#: Names of the error codes a produce or fetch response commonly carries
#: (Kafka's ``org.apache.kafka.common.protocol.Errors``).
ERROR_NAMES = {
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    29: "TOPIC_AUTHORIZATION_FAILED",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH",
    56: "KAFKA_STORAGE_ERROR",
    74: "FENCED_LEADER_EPOCH",
    87: "INVALID_RECORD",
    100: "UNKNOWN_TOPIC_ID",
}

# The fields the import reads, in both version shapes (Kafka's message
# schemas: ProduceRequest/ProduceResponse/FetchRequest/FetchResponse.json).
# Fields of other versions are simply absent (null) in a line.
LINE_SCHEMA = """
requestHeader STRUCT<requestApiKey: INT, requestApiVersion: INT,
  correlationId: INT, clientId: STRING, requestApiKeyName: STRING>,
request STRUCT<
  acks: INT, timeoutMs: INT,
  topicData: ARRAY<STRUCT<name: STRING, topicId: STRING,
    partitionData: ARRAY<STRUCT<index: INT>>>>,
  replicaId: INT, replicaState: STRUCT<replicaId: INT>,
  topics: ARRAY<STRUCT<topic: STRING, topicId: STRING,
    partitions: ARRAY<STRUCT<partition: INT, fetchOffset: BIGINT>>>>>,
response STRUCT<errorCode: INT,
  responses: ARRAY<STRUCT<name: STRING, topic: STRING, topicId: STRING,
    partitionResponses: ARRAY<STRUCT<index: INT, errorCode: INT, baseOffset: BIGINT>>,
    partitions: ARRAY<STRUCT<partitionIndex: INT, errorCode: INT>>>>>,
connection STRING, totalTimeMs DOUBLE, requestQueueTimeMs DOUBLE,
localTimeMs DOUBLE, remoteTimeMs DOUBLE
"""


# -- inputs (no Spark) -------------------------------------------------------------
def find_logs(paths: Sequence[str]) -> list[str]:
    """The log files under ``paths`` (files, or directories walked recursively).

    Hidden files and names starting with ``_`` are left out, as Spark does.
    A gzipped file must be named ``*.gz`` (Spark decompresses by suffix).

    :raises ReplayUsageError: for a missing or unreadable path, a directory
        without files, or a gzipped file without the suffix
    """
    files: list[str] = []
    for path in paths:
        if not os.path.exists(path):
            raise ReplayUsageError(f"LOG {path!r} does not exist")
        if not os.access(path, os.R_OK):
            raise ReplayUsageError(f"LOG {path!r} is not readable")
        if os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                found += [
                    os.path.join(root, n)
                    for n in sorted(names)
                    if not n.startswith(("_", "."))
                ]
            if not found:
                raise ReplayUsageError(f"LOG {path!r} is a directory without files")
            files += found
        else:
            files.append(path)
    for path in files:
        with open(path, "rb") as fh:
            gzipped = fh.read(2) == b"\x1f\x8b"
        if gzipped and not path.endswith(".gz"):
            raise ReplayUsageError(
                f"LOG file {path!r} is gzipped but not named .gz; rename it "
                "(Spark decompresses by suffix)"
            )
    return sorted(dict.fromkeys(os.path.abspath(f) for f in files))


#: How much of each file the check before Spark reads (lines, and bytes).
HEAD_LINES = 10_000
HEAD_BYTES = 16 << 20


def check_request_lines(files: Sequence[str], logs: Sequence[str]) -> None:
    """Fail fast if no file's first lines hold a request-log line.

    Reads up to :data:`HEAD_LINES` lines (and :data:`HEAD_BYTES`) of each
    file, plain or gzipped, and stops at the first ``Completed request:``;
    a file it cannot read is left to Spark.

    :raises ReplayUsageError: naming LOG and how many lines were read
    """
    import gzip
    import zlib

    marker = MARKER.encode()
    seen, whole = 0, True
    for path in files:
        opener: Any = gzip.open if path.endswith(".gz") else open
        budget = HEAD_BYTES
        try:
            with opener(path, "rb") as fh:
                for _ in range(HEAD_LINES):
                    line = fh.readline(budget)
                    if not line:
                        break
                    if marker in line:
                        return
                    seen += 1
                    budget -= len(line)
                    if budget <= 0:
                        break
                whole = whole and not fh.read(1)
        except (OSError, EOFError, zlib.error):
            return
    where = f"{seen:,} lines" if whole else f"the first {seen:,} lines read"
    raise ReplayUsageError(
        f"LOG {', '.join(logs)}: no request-log lines ('{MARKER}...') in "
        f"{where}; is kafka.request.logger at DEBUG?"
    )


_DESCRIBE = re.compile(r"Topic:\s*(\S+)\s+TopicId:\s*(\S+)")


def parse_topic_ids(text: str) -> dict[str, str]:
    """Topic id -> name from a JSON object or ``kafka-topics.sh --describe`` output.

    >>> parse_topic_ids("Topic: orders\\tTopicId: q1w2\\tPartitionCount: 3")
    {'q1w2': 'orders'}

    :raises ValueError: if the text is neither, or maps nothing
    """
    stripped = text.strip()
    mapping: dict[str, str] = {}
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise ValueError(f"not valid JSON ({exc})") from None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise ValueError("the JSON object must map topic ids to topic names")
        mapping = dict(data)
    else:
        for name, topic_id in _DESCRIBE.findall(text):
            if mapping.get(topic_id, name) != name:
                raise ValueError(f"topic id {topic_id} has two names")
            mapping[topic_id] = name
    if not mapping:
        raise ValueError(
            'no topic ids in it: give a JSON object {"<topic id>": "<name>", ...} '
            "or the output of kafka-topics.sh --describe"
        )
    return mapping


def read_topic_ids(path: str) -> dict[str, str]:
    """:func:`parse_topic_ids` of a file; one-line errors naming ``--topic-ids``."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ReplayUsageError(f"--topic-ids {path!r}: cannot read it ({reason})")
    try:
        return parse_topic_ids(text)
    except ValueError as exc:
        raise ReplayUsageError(f"--topic-ids {path!r}: {exc}") from None


# -- Spark ---------------------------------------------------------------------------
#
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
def _json_body(value: Any) -> tuple[Any, Any]:
    """(is a request-log line, its JSON object or null).

    The object runs from the first marker to the line's last ``}`` (log4j
    appends `` (kafka.request.logger)``).  Every step is on bytes (find,
    copy): positions in characters (``instr``, ``substring`` and ``length``
    on strings) walk the whole 1-2 kB line each time, and took a fifth of
    the parse's CPU.  The marker is ASCII, so byte and character cuts agree.
    """
    from pyspark.sql import functions as F

    is_request = value.contains(MARKER)
    start = F.octet_length(F.substring_index(value, MARKER, 1)) + (len(MARKER) + 1)
    end = F.octet_length(value) - F.octet_length(F.substring_index(value, "}", -1))
    body = F.substring(value.cast("binary"), start, end - start + 1).cast("string")
    return is_request, F.when(is_request, body)


def _completed_ms(value: Any, timezone: str) -> Any:
    """The line's ``[yyyy-MM-dd HH:mm:ss,SSS]`` (log4j's %d, at fixed
    positions) in epoch ms, or null."""
    from pyspark.sql import functions as F

    def part(pos: int, n: int) -> Any:
        return F.substring(value, pos, n).try_cast("int")

    secs = ((part(19, 2) * 1000 + part(22, 3)) / F.lit(1000)).cast("decimal(8,3)")
    stamp = F.try_make_timestamp(
        part(2, 4),
        part(7, 2),
        part(10, 2),
        part(13, 2),
        part(16, 2),
        secs,
        F.lit(timezone),
    )
    bracketed = (F.substring(value, 1, 1) == "[") & (F.substring(value, 25, 1) == "]")
    return F.when(bracketed, F.unix_millis(stamp))


def _read_lines(spark: Any, files: list[str], timezone: str) -> Any:
    """One row per line: ``line_id``, the text, ``is_request``,
    ``completed_ms`` and the parsed JSON ``j`` (null for other lines)."""
    from pyspark.sql import functions as F

    value = F.col("value")
    is_request, body = _json_body(value)
    return spark.read.text(files).select(
        F.monotonically_increasing_id().alias("line_id"),
        value,
        is_request.alias("is_request"),
        _completed_ms(value, timezone).alias("completed_ms"),
        F.from_json(body, LINE_SCHEMA, {"mode": "PERMISSIVE"}).alias("j"),
    )


def _line_fields(raw: Any) -> Any:
    """The fields of each line the import keeps: kind, header, times in µs,
    and its request and response (still nested)."""
    from pyspark.sql import functions as F

    header = F.col("j.requestHeader")

    def us(name: str) -> Any:
        return F.round(F.col("j")[name] * 1000).cast("long")

    ok = (
        F.col("is_request")
        & F.col("completed_ms").isNotNull()
        & header["requestApiKey"].isNotNull()
    )
    kind = (
        F.when(~F.col("is_request"), F.lit("other line"))
        .when(~ok, F.lit("unparseable"))
        .otherwise(
            F.coalesce(
                header["requestApiKeyName"],
                F.concat(F.lit("api "), header["requestApiKey"].cast("string")),
            )
        )
    )
    replica = F.coalesce(
        F.col("j.request.replicaState.replicaId"), F.col("j.request.replicaId")
    )
    return raw.select(
        "line_id",
        F.when(F.col("is_request") & ~ok, F.col("value")).alias("line"),
        kind.alias("kind"),
        F.when(ok, header["requestApiKey"]).alias("api_key"),
        F.when(ok, header["requestApiKeyName"]).alias("api"),
        header["requestApiVersion"].alias("api_version"),
        header["correlationId"].alias("correlation_id"),
        header["clientId"].alias("client_id"),
        F.col("j.connection").alias("connection"),
        "completed_ms",
        # The end of the request's local time (see the module docstring).
        (
            F.col("completed_ms") * 1000
            - us("totalTimeMs")
            + us("requestQueueTimeMs")
            + us("localTimeMs")
        ).alias("effect_us"),
        F.col("j.remoteTimeMs").alias("remote_time_ms"),
        replica.alias("replica"),
        F.col("j.request").alias("request"),
        F.col("j.response").alias("response"),
    )


def _partition_arrays(lines: Any, key: Any) -> Any:
    """``lines`` with its request and response replaced by what the import
    keeps of them: ``produce_parts`` (partition, and the response's error and
    base offset for it) with ``request_partitions``, or ``fetch_parts``
    (partition, fetch offset, error) of a follower's fetch."""
    from pyspark.sql import functions as F

    produce = F.col("api_key") == 0
    follower = (F.col("api_key") == 1) & (F.col("replica") >= 0)
    acks = F.col("acks")
    with_lookups = lines.select(
        "*",
        F.col("request.acks").alias("acks"),
        F.when(produce, _produce_responses()).alias("_resp"),
        F.when(follower, _fetch_errors()).alias("_errors"),
    )
    kept = [c for c in lines.columns if c not in ("request", "response")]
    arrays = with_lookups.select(
        *kept,
        "acks",
        F.col("request.timeoutMs").cast("long").alias("timeout_ms"),
        F.col("response.errorCode").alias("top_error"),
        F.when(produce, _produce_parts(key)).alias("produce_parts"),
        F.when(follower, _fetch_parts(key)).alias("fetch_parts"),
    )
    waited = F.size(
        F.filter(
            F.col("produce_parts"),
            lambda p: (acks == -1) & p["r"]["error"].isin(0, REQUEST_TIMED_OUT),
        )
    )
    return arrays.withColumn("request_partitions", F.when(produce, waited))


def _parse_lines(spark: Any, files: list[str], timezone: str, key: Any) -> Any:
    """One row per line: its kind, timestamp, header fields, times in µs, and
    the partitions of its produce or follower fetch (see the plan above)."""
    return _partition_arrays(_line_fields(_read_lines(spark, files, timezone)), key)


def _ceil_ms(us_col: Any) -> Any:
    from pyspark.sql import functions as F

    return F.floor((us_col + 999) / F.lit(1000)).cast("long")


def _topic_key(topic_ids: dict[str, str]) -> Any:
    """(name, topicId) -> the topic part of the partition key (ids mapped)."""
    from pyspark.sql import functions as F

    def key(name: Any, topic_id: Any) -> Any:
        mapped = topic_id
        if topic_ids:
            pairs = [F.lit(x) for kv in sorted(topic_ids.items()) for x in kv]
            mapped = F.coalesce(F.element_at(F.create_map(*pairs), topic_id), topic_id)
        return F.coalesce(name, mapped)

    return key


def _reason_for_error(code: Any, prefix: str) -> Any:
    from pyspark.sql import functions as F

    names = F.create_map(*[F.lit(x) for kv in sorted(ERROR_NAMES.items()) for x in kv])
    name = F.coalesce(F.element_at(names, code), F.lit("?"))
    return F.concat(F.lit(prefix), code.cast("string"), F.lit(" "), name)


def _select(rows: Any, types: dict[str, str], **given: Any) -> Any:
    """The columns of ``types``, in order: ``given`` (a column or a column
    name), else the column of that name in ``rows``, else null; each cast."""
    from pyspark.sql import functions as F

    columns = []
    for name, dtype in types.items():
        value = given.get(name, name if name in rows.columns else None)
        column = F.col(value) if isinstance(value, str) else value
        columns.append(
            (F.lit(None) if column is None else column).cast(dtype).alias(name)
        )
    return rows.select(*columns)


def _part_key(topic: Any, index: Any) -> Any:
    """``topic-index``, Kafka's TopicPartition.toString (the watch key)."""
    from pyspark.sql import functions as F

    return F.concat(topic, F.lit("-"), index.cast("string"))


def _nested(topics: str, partitions: str, make: Any) -> Any:
    """``make(topic, partition)`` for every partition of every topic, flattened."""
    from pyspark.sql import functions as F

    return F.flatten(
        F.transform(
            F.col(topics), lambda t: F.transform(t[partitions], lambda p: make(t, p))
        )
    )


#: Every column of ``events/`` and of ``skipped/``: the produce and fetch rows
#: both are cut from.
ROW_COLUMNS = {
    **EVENT_COLUMNS,
    **{k: v for k, v in SKIPPED_COLUMNS.items() if k not in EVENT_COLUMNS},
}


def _produce_responses() -> Any:
    """Each partition of a produce response: (key, error, baseOffset)."""
    from pyspark.sql import functions as F

    return _nested(
        "response.responses",
        "partitionResponses",
        lambda t, p: F.struct(
            _part_key(F.coalesce(t["name"], t["topicId"]), p["index"]).alias("k"),
            p["errorCode"].alias("error"),
            p["baseOffset"].alias("base"),
        ),
    )


def _produce_parts(key: Any) -> Any:
    """Each partition of a produce request with its response (``_resp``)."""
    from pyspark.sql import functions as F

    parts = _nested(
        "request.topicData",
        "partitionData",
        lambda t, p: F.struct(
            _part_key(key(t["name"], t["topicId"]), p["index"]).alias("partition"),
            _part_key(F.coalesce(t["name"], t["topicId"]), p["index"]).alias("k"),
        ),
    )
    return F.transform(
        parts,
        lambda p: F.struct(
            p["partition"].alias("partition"),
            F.get(F.filter(F.col("_resp"), lambda r: r["k"] == p["k"]), 0).alias("r"),
        ),
    )


def _fetch_errors() -> Any:
    """Each partition of a fetch response: (key, error)."""
    from pyspark.sql import functions as F

    return _nested(
        "response.responses",
        "partitions",
        lambda t, p: F.struct(
            _part_key(F.coalesce(t["topic"], t["topicId"]), p["partitionIndex"]).alias(
                "k"
            ),
            p["errorCode"].alias("error"),
        ),
    )


def _fetch_parts(key: Any) -> Any:
    """Each partition of a fetch request: (partition, fetchOffset, error)."""
    from pyspark.sql import functions as F

    parts = _nested(
        "request.topics",
        "partitions",
        lambda t, p: F.struct(
            _part_key(key(t["topic"], t["topicId"]), p["partition"]).alias("partition"),
            _part_key(F.coalesce(t["topic"], t["topicId"]), p["partition"]).alias("k"),
            p["fetchOffset"].alias("fetch_offset"),
        ),
    )
    return F.transform(
        parts,
        lambda p: F.struct(
            p["partition"].alias("partition"),
            p["fetch_offset"].alias("fetch_offset"),
            F.get(F.filter(F.col("_errors"), lambda e: e["k"] == p["k"]), 0)[
                "error"
            ].alias("error"),
        ),
    )


def _produce_reason() -> Any:
    """Why a produce partition never waited in the purgatory, or null (the
    window's reasons come later, in :func:`_import_rows`)."""
    from pyspark.sql import functions as F

    error, acks = F.col("error"), F.col("acks")
    return (
        F.when(F.col("partition").isNull(), F.lit("produce without partitions"))
        .when(acks == 0, F.lit("acks=0"))
        .when(acks == 1, F.lit("acks=1"))
        .when(acks != -1, F.concat(F.lit("acks="), acks.cast("string")))
        .when(error.isNull(), F.lit("no response for the partition"))
        .when(~error.isin(0, REQUEST_TIMED_OUT), _reason_for_error(error, "error "))
        .when(F.col("base").isNull() | (F.col("base") < 0), F.lit("no baseOffset"))
        .when(F.col("ts_ms").isNull(), F.lit("no request times"))
        .when(F.col("timeout_ms").isNull(), F.lit("no timeoutMs"))
    )


def _fetch_reason() -> Any:
    """Why a follower's fetch of a partition is not an event, or null."""
    from pyspark.sql import functions as F

    top, error = F.col("top_error"), F.col("error")
    return (
        F.when(top.isNotNull() & (top != 0), _reason_for_error(top, "fetch error "))
        .when(
            error.isNotNull() & (error != 0), _reason_for_error(error, "fetch error ")
        )
        .when(
            F.col("fetch_offset").isNull() | (F.col("fetch_offset") < 0),
            F.lit("no fetchOffset"),
        )
        .when(F.col("ts_ms").isNull(), F.lit("no request times"))
    )


#: What each row of :func:`_import_rows` is (``row``): a produce partition, a
#: follower's fetch of a partition, an unparseable line, or a line that is
#: only counted (other lines, other requests, consumers' fetches, a
#: follower's fetch without partitions).
PRODUCE_ROW, FETCH_ROW, BAD_ROW, COUNTED_ROW = "produce", "fetch", "bad", "counted"


#: The columns :func:`_import_rows` adds to ``ROW_COLUMNS``: what the row is,
#: whether it is its line's first, the line's kind and fetch source (for the
#: line counts), and ``line_id`` (never null, unlike ``log_request_id``).
COUNT_COLUMNS = {
    "row": "string",
    "first": "boolean",
    "line_kind": "string",
    "source": "string",
    "line_id": "bigint",
}
#: Groups the rows that are not appends pass the window in (see _import_rows).
WINDOW_SPREAD = 64


def _import_rows(lines: Any) -> Any:
    """Every row of ``events/`` and ``skipped/`` (``reason`` null for
    events), and one row for each line that is only counted; columns
    ``ROW_COLUMNS`` plus ``row`` (what the row is), ``first`` (the first row
    of its line), ``line_kind`` and ``source`` (the line's kind and, for a
    fetch, follower or consumer).

    One branch over ``lines``: a single explode gives every partition of a
    produce or of a follower's fetch its row (and every other line one row),
    and a single window over all of them gives each append its end offset.
    Two branches (a union, or a filter and its complement) would each run
    the whole parse below them.
    """
    from pyspark.sql import functions as F

    flat = _exploded_rows(lines)
    is_ = {name: F.col("row") == name for name in (PRODUCE_ROW, FETCH_ROW, BAD_ROW)}
    reason = (
        F.when(is_[PRODUCE_ROW], _produce_reason())
        .when(is_[FETCH_ROW], _fetch_reason())
        .when(is_[BAD_ROW], F.lit(UNPARSEABLE))
    )
    appended = F.coalesce(is_[PRODUCE_ROW] & (F.col("base") >= 0), F.lit(False))
    with_next = flat.select(
        "*", reason.alias("reason0"), _next_base(appended).alias("next_base")
    )
    final_reason = F.coalesce(
        F.col("reason0"),
        F.when(
            appended & F.col("next_base").isNull(),
            F.lit("no later append on the partition (end offset unknown)"),
        ).when(
            appended & (F.col("next_base") <= F.col("base")),
            F.lit("baseOffset repeats"),
        ),
    )
    produce_or_fetch = is_[PRODUCE_ROW] | is_[FETCH_ROW]
    produce_or_bad = is_[PRODUCE_ROW] | is_[BAD_ROW]
    return _select(
        with_next,
        {**ROW_COLUMNS, **COUNT_COLUMNS},
        ts_ms=F.when(produce_or_fetch, F.col("ts_ms")),
        kind=F.when(is_[PRODUCE_ROW], F.lit("produce"))
        .when(is_[FETCH_ROW], F.lit("fetch"))
        .when(is_[BAD_ROW], F.col("line_kind")),
        required_offset="next_base",
        timeout_ms=F.when(produce_or_bad, F.col("timeout_ms")),
        replica=F.when(~is_[PRODUCE_ROW], F.col("replica")),
        log_request_id=F.when(produce_or_fetch, F.col("line_id")),
        remote_time_ms=F.when(produce_or_bad, F.col("remote_time_ms")),
        broker_error_code=F.when(is_[PRODUCE_ROW], F.col("error")),
        reason=final_reason,
        api=F.when(is_[PRODUCE_ROW], F.lit("PRODUCE")).when(
            is_[FETCH_ROW], F.lit("FETCH")
        ),
    )


def _row_parts() -> Any:
    """Each line's partitions, one shape for both kinds: those of a produce
    (with its response's error and base offset) or of a follower's fetch
    (with its fetch offset and error); null for every other line."""
    from pyspark.sql import functions as F

    produce = F.col("api_key") == 0
    follower = (F.col("api_key") == 1) & (F.col("replica") >= 0)
    no_long = F.lit(None).cast("bigint")
    return F.when(
        produce,
        F.transform(
            "produce_parts",
            lambda p: F.struct(
                p["partition"].alias("partition"),
                p["r"]["error"].alias("error"),
                p["r"]["base"].alias("base"),
                no_long.alias("fetch_offset"),
            ),
        ),
    ).when(
        follower,
        F.transform(
            "fetch_parts",
            lambda p: F.struct(
                p["partition"].alias("partition"),
                p["error"].alias("error"),
                no_long.alias("base"),
                p["fetch_offset"].alias("fetch_offset"),
            ),
        ),
    )


def _exploded_rows(lines: Any) -> Any:
    """One row per partition of a produce or a follower's fetch, and one per
    other line: what the row is (``row``), whether it is its line's first,
    the line's kind and fetch source, and the line's fields the outputs keep."""
    from pyspark.sql import functions as F

    produce = F.col("api_key") == 0
    follower = (F.col("api_key") == 1) & (F.col("replica") >= 0)
    # A produce without partitions keeps its one (outer) row, as a skipped
    # row; a follower's fetch without any is only counted.
    exploded = lines.select("*", F.posexplode_outer(_row_parts()).alias("pos", "p"))
    row = (
        F.when(produce, F.lit(PRODUCE_ROW))
        .when(follower & F.col("pos").isNotNull(), F.lit(FETCH_ROW))
        .when(F.col("kind") == "unparseable", F.lit(BAD_ROW))
        .otherwise(F.lit(COUNTED_ROW))
    )
    fetch_from = F.when(
        F.col("kind") == "FETCH",
        F.when(F.col("replica") >= 0, "follower").otherwise("consumer"),
    )
    return exploded.select(
        row.alias("row"),
        (F.col("pos").isNull() | (F.col("pos") == 0)).alias("first"),
        F.col("kind").alias("line_kind"),
        fetch_from.alias("source"),
        "line_id",
        # Numbered among the produce rows only (the expression runs for those
        # alone), as a select of them would number them.
        F.when(produce, F.monotonically_increasing_id()).alias("request_id"),
        F.col("p.partition").alias("partition"),
        F.col("p.error").alias("error"),
        F.col("p.base").alias("base"),
        F.col("p.fetch_offset").alias("fetch_offset"),
        _ceil_ms(F.col("effect_us")).alias("ts_ms"),
        "acks",
        "timeout_ms",
        "top_error",
        "request_partitions",
        "remote_time_ms",
        "replica",
        "client_id",
        "correlation_id",
        "connection",
        "api_version",
        "completed_ms",
        "line",
    )


def _next_base(appended: Any) -> Any:
    """The end offset of an append (``appended``: a produce row with a base
    offset): the next append's baseOffset on the partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # Every produce partition with a base offset counts, whatever its acks.
    # The other rows pass the same window (one branch), in WINDOW_SPREAD
    # groups by line, whose lead nobody reads: enough groups to spread them
    # over the tasks, few enough that the window does not set up a group
    # per row.
    by_offset = Window.partitionBy(
        F.when(appended, F.col("partition")),
        F.when(~appended, F.col("line_id") % WINDOW_SPREAD),
    ).orderBy("base")
    return F.when(appended, F.lead("base").over(by_offset))


def _split(rows: Any) -> tuple[Any, Any]:
    """(events, skipped) of :func:`_import_rows`."""
    from pyspark.sql import functions as F

    # kind and log_request_id as expressions Spark knows are never null, so
    # that the events table's schema says so, as it always has.
    events = _select(
        rows.where(
            F.col("row").isin(PRODUCE_ROW, FETCH_ROW) & F.col("reason").isNull()
        ),
        EVENT_COLUMNS,
        kind=F.when(F.col("row") == PRODUCE_ROW, F.lit("produce")).otherwise(
            F.lit("fetch")
        ),
        log_request_id="line_id",
    )
    skipped = _select(rows.where(F.col("reason").isNotNull()), SKIPPED_COLUMNS)
    return events, skipped


def import_frames(
    spark: Any,
    files: list[str],
    topic_ids: dict[str, str] | None = None,
    timezone: str = "UTC",
) -> tuple[Any, Any, Any]:
    """(events, skipped, parsed lines) DataFrames of request-log ``files``.

    ``parsed`` has one row per input line (``kind``: ``other line``,
    ``unparseable`` or the API name).  Each of the three runs the parse on
    its own; the import itself persists the rows both outputs are cut from.
    """
    lines = _parse_lines(spark, files, timezone, _topic_key(topic_ids or {}))
    events, skipped = _split(_import_rows(lines))
    return events, skipped, lines


# -- the job -------------------------------------------------------------------------
def _line_counts(rows: list[Any]) -> dict[str, Any]:
    """Lines by kind (API, follower/consumer fetch) and the time span, from
    the groups of :func:`_count_groups` (a line's first row counts it)."""
    rows = [r for r in rows if r["first"]]
    counts: dict[str, Any] = {"lines": 0, "other_lines": 0, "unparseable": 0}
    by_api: dict[str, int] = {}
    fetch = {"follower": 0, "consumer": 0}
    first = last = None
    for row in rows:
        counts["lines"] += row["n"]
        if row["line_kind"] == "other line":
            counts["other_lines"] += row["n"]
            continue
        if row["line_kind"] == "unparseable":
            counts["unparseable"] += row["n"]
            continue
        by_api[row["line_kind"]] = by_api.get(row["line_kind"], 0) + row["n"]
        if row["source"]:
            fetch[row["source"]] += row["n"]
        first = row["first_ms"] if first is None else min(first, row["first_ms"])
        last = row["last_ms"] if last is None else max(last, row["last_ms"])
    counts["request_lines"] = sum(by_api.values())
    counts["requests_by_api"] = dict(sorted(by_api.items(), key=lambda kv: -kv[1]))
    counts["fetch_requests"] = fetch
    counts["time_span"] = _span(first, last)
    return counts


def _span(first: int | None, last: int | None) -> dict[str, Any]:
    def iso(ms: int | None) -> str | None:
        if ms is None:
            return None
        secs, rest = divmod(ms, 1000)
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rest:03d}Z"

    seconds = None if first is None or last is None else (last - first) / 1000
    return {"first": iso(first), "last": iso(last), "seconds": seconds}


def _count_groups(rows: Any) -> list[Any]:
    """One small aggregate of the import's rows, all the summary's counts
    come from: rows by what they are, line kind, source, reason, partition,
    kind and follower, with their lines' first and last timestamps."""
    from pyspark.sql import functions as F

    return collect(
        rows.groupBy(
            "row",
            "first",
            "line_kind",
            "source",
            "reason",
            "partition",
            "kind",
            "replica",
        ).agg(
            F.count("*").alias("n"),
            F.sum((F.col("broker_error_code") == REQUEST_TIMED_OUT).cast("long")).alias(
                "timed_out"
            ),
            F.min("completed_ms").alias("first_ms"),
            F.max("completed_ms").alias("last_ms"),
        )
    )


def _table_counts(groups: list[Any], events: Any) -> dict[str, Any]:
    """Partitions, followers, rows and skipped reasons, from the groups of
    :func:`_count_groups`, and the produce requests (a distinct count of
    ``events``).  Nothing is read back from the written tables.
    """
    from pyspark.sql import functions as F

    groups = [g for g in groups if g["row"] != COUNTED_ROW]
    (requests,) = collect(
        events.where(F.col("kind") == "produce").agg(
            F.countDistinct("log_request_id").alias("n")
        )
    )
    totals = {"produce_rows": 0, "fetch_rows": 0, "timed_out_rows": 0}
    partitions: dict[str, list[int]] = {}
    followers: set[int] = set()
    reasons: dict[str, int] = {}
    for g in groups:
        if g["reason"] is not None:
            reasons[g["reason"]] = reasons.get(g["reason"], 0) + g["n"]
            continue
        produce = g["kind"] == "produce"
        totals["produce_rows" if produce else "fetch_rows"] += g["n"]
        totals["timed_out_rows"] += g["timed_out"] or 0
        if g["partition"] is not None:
            partitions.setdefault(g["partition"], [0, 0])[0 if produce else 1] += g["n"]
        if g["replica"] is not None:
            followers.add(g["replica"])
    lonely = sorted(k for k, (p, f) in partitions.items() if p > 0 and f == 0)
    return {
        "events": {
            "produce_rows": totals["produce_rows"],
            "fetch_rows": totals["fetch_rows"],
            "produce_requests": requests["n"],
            "timed_out_rows": totals["timed_out_rows"],
            "partitions": len(partitions),
            "followers": len(followers),
        },
        "partitions_without_fetches": lonely[:1000],
        "skipped": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def print_import_summary(summary: dict[str, Any], out: TextIO) -> None:
    """What was found, in a few lines."""
    lines = summary["lines"]
    ev = summary["events"]
    span = lines["time_span"]
    print(
        f"lines: {lines['lines']:,} ({lines['request_lines']:,} requests, "
        f"{lines['other_lines']:,} other lines, {lines['unparseable']:,} unparseable)",
        file=out,
    )
    apis = ", ".join(f"{k} {v:,}" for k, v in lines["requests_by_api"].items())
    print(f"requests by type: {apis or 'none'}", file=out)
    fetch = lines["fetch_requests"]
    print(
        f"fetches: {fetch['follower']:,} from followers, {fetch['consumer']:,} "
        "from consumers",
        file=out,
    )
    print(
        f"events: {ev['produce_rows']:,} produce rows ({ev['produce_requests']:,} "
        f"requests, {ev['timed_out_rows']:,} timed out), {ev['fetch_rows']:,} fetch "
        f"rows; {ev['partitions']:,} partitions, {ev['followers']:,} followers",
        file=out,
    )
    print(
        f"time span: {span['first']} .. {span['last']} ({span['seconds']} s)", file=out
    )
    lonely = summary["partitions_without_fetches"]
    if lonely:
        print(
            f"warning: {len(lonely):,} partition(s) have produces but no follower "
            f"fetch (e.g. {lonely[0]}); the replay completes their requests at "
            "once. If followers name the topic by id, pass --topic-ids",
            file=out,
        )
    skipped = summary["skipped"]
    print(f"skipped rows: {sum(skipped.values()):,} (see skipped/)", file=out)
    for reason, n in list(skipped.items())[:12]:
        print(f"  {n:>10,}  {reason}", file=out)


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
        # See "the plan" above _json_body: one parse, one window, and every
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
