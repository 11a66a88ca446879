"""The replay engine's columns and records: what goes in and what comes out.

The input columns with their binding types, the schema of each output record
(outcomes, purgatory sizes, rejected rows, the per-call meta record), the
tagged union ``resolve_batches`` yields them in, and the reasons a row is
rejected.  Data only: :mod:`tickwheel.spark.engine` says how they are used.
"""

from __future__ import annotations

import pyarrow as pa

#: Largest event time / delay the timing wheel accepts (ms).
MAX_TIME_MS = 2**62 // 1_000_000


INPUT_COLUMNS: dict[str, pa.DataType] = {
    "ts_ms": pa.int64(),
    "partition": pa.string(),
    "kind": pa.string(),
    "request_id": pa.int64(),
    "required_offset": pa.int64(),
    "timeout_ms": pa.int64(),
    "replica": pa.int32(),
    "fetch_offset": pa.int64(),
}


OUTCOME_SCHEMA = pa.schema(
    [
        ("request_id", pa.int64()),
        ("partition", pa.string()),
        ("arrival_ms", pa.int64()),
        ("deadline_ms", pa.int64()),
        ("outcome", pa.string()),
        ("done_ms", pa.int64()),
        ("latency_ms", pa.int64()),
        ("timeout_ms", pa.int64()),
    ]
)


SIZE_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("timeout_ms", pa.int64()),
        ("window_start_ms", pa.int64()),
        ("pending_end", pa.int64()),
        ("pending_max", pa.int64()),
        ("arrivals", pa.int64()),
        ("completed", pa.int64()),
        ("expired", pa.int64()),
    ]
)


#: ``raw``: for ``invalid <column>``, the text of the value that did not cast
#: (the typed column is null); null for every other reason.
REJECTED_SCHEMA = pa.schema(
    [(name, dtype) for name, dtype in INPUT_COLUMNS.items()]
    + [("reason", pa.string()), ("raw", pa.string())]
)


META_SCHEMA = pa.schema(
    [
        ("worker", pa.string()),
        ("accelerated", pa.bool_()),
        ("events", pa.int64()),
    ]
)


#: The meta record: one per resolve_batches call.  ``ids`` (only with
#: report_ids) holds the sorted request_ids the call replayed (see
#: :func:`pack_ids`), so a driver can find duplicates across calls.
META_RECORD_SCHEMA = pa.schema(list(META_SCHEMA) + [pa.field("ids", pa.binary())])


RECORD_SCHEMAS = {
    "outcome": OUTCOME_SCHEMA,
    "size": SIZE_SCHEMA,
    "rejected": REJECTED_SCHEMA,
    "meta": META_RECORD_SCHEMA,
}


#: The record kinds besides ``outcome``: each is one struct column of the union.
OTHER_RECORDS = ("size", "rejected", "meta")


#: The one schema resolve_batches yields, a tagged union: the outcome
#: columns (set on outcome rows, null on the others), one struct column per
#: other record kind (``size``, ``rejected``, ``meta``: set on that kind's
#: rows, null on the others) and ``record``, the kind.  Every column holds
#: what its name says.  Spark writes the union once, partitioned by
#: ``record``; the outcomes dataset is then the ``record=outcome`` rows'
#: outcome columns.
OUTPUT_SCHEMA = pa.schema(
    list(OUTCOME_SCHEMA)
    + [pa.field(kind, pa.struct(list(RECORD_SCHEMAS[kind]))) for kind in OTHER_RECORDS]
    + [pa.field("record", pa.string())]
)


_KIND_FETCH, _KIND_PRODUCE, _KIND_OTHER, _KIND_NULL = 0, 1, 2, 3


#: Why a row is rejected (index 0: not rejected).  Also, from the Spark glue:
#: "invalid <column>" (a value that does not cast to the column's type).
_REASONS = (
    "",
    "null partition",
    "null kind",
    "unknown kind",
    "null ts_ms",
    "ts_ms out of range",
    "null request_id",
    "null required_offset",
    "null timeout_ms",
    "negative timeout_ms",
    "negative required_offset",
    "timeout_ms out of range",
    "null replica",
    "null fetch_offset",
    "negative fetch_offset",
    "duplicate request_id",
)


REJECT_REASONS = _REASONS[1:]
