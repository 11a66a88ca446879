"""The replay engine's outputs: outcome, size, rejected and meta records.

What a replayed partition yields (per setting, its outcomes and purgatory
sizes), the rows it rejected, the one meta record per call (with the
replayed request_ids packed), and :func:`split_output`, which turns the
union back into named tables.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import tickwheel

from ._engine_arrow import _union_batch
from ._engine_checks import _Events
from ._engine_schemas import (
    _REASONS,
    INPUT_COLUMNS,
    META_SCHEMA,
    OUTCOME_SCHEMA,
    OUTPUT_SCHEMA,
    RECORD_SCHEMAS,
)
from ._engine_sim import _PartitionReplay, _Setting
from ._engine_sizes import _check_sizes, purgatory_sizes


def _rejected_batch(table: pa.Table, code: np.ndarray) -> pa.RecordBatch:
    """The rows with a non-zero reason code, as input columns plus ``reason``."""
    bad = np.flatnonzero(code != 0)
    take = pa.array(bad)
    columns: dict[str, Any] = {c: table.column(c).take(take) for c in INPUT_COLUMNS}
    if pa.types.is_integer(table.column("kind").type):
        names = pc.if_else(
            pc.equal(columns["kind"], 0),
            "fetch",
            pc.if_else(pc.equal(columns["kind"], 1), "produce", None),
        )
        columns["kind"] = pc.coalesce(names, pc.cast(columns["kind"], pa.string()))
    columns["reason"] = np.array(_REASONS, dtype=object)[code[bad]]
    return _union_batch("rejected", columns, len(bad))


def _output_batches(
    replay: _PartitionReplay, events: _Events, check: bool
) -> Iterator[pa.RecordBatch]:
    """Per setting, the outcome batch and the purgatory-size batch of a replay."""
    # Every setting's recorded lists become arrays (and are freed) first.
    produces = _Produces.of(events)
    outcomes = [_outcome_columns(s, produces) for s in replay.settings]
    for s, columns in zip(replay.settings, outcomes):
        arrival, done_ms = columns["arrival_ms"], columns["done_ms"]
        expired = columns.pop("expired")
        yield _union_batch(
            "outcome", _with_partition(replay.name, columns), len(arrival)
        )
        if check:
            _check_sizes(replay, s, arrival, done_ms)
        sizes = purgatory_sizes(arrival, done_ms, expired)
        k = len(sizes["window_start_ms"])
        sizes["timeout_ms"] = (
            pa.nulls(k, pa.int64())
            if s.timeout_ms is None
            else np.full(k, s.timeout_ms, dtype=np.int64)
        )
        yield _union_batch("size", _with_partition(replay.name, sizes), k)


def _with_partition(name: str, columns: dict[str, Any]) -> dict[str, Any]:
    """``columns`` plus a ``partition`` column holding ``name`` (first)."""
    n = len(next(iter(columns.values())))
    return {"partition": pa.repeat(pa.scalar(name, pa.string()), n), **columns}


class _Produces(NamedTuple):
    """The replayed produces by request_id: how outcomes find their input row."""

    by_id: np.ndarray  # row order sorted by request_id
    sorted_ids: np.ndarray
    arrival_ms: np.ndarray
    timeout_ms: np.ndarray

    @classmethod
    def of(cls, events: _Events) -> _Produces:
        produce = ~events.is_fetch
        ids = events.first[produce]
        by_id = np.argsort(ids)  # unique ids: no need for a stable sort
        return cls(by_id, ids[by_id], events.ts[produce], events.timeouts[produce])


def _outcome_columns(s: _Setting, produces: _Produces) -> dict[str, Any]:
    """A setting's recorded outcomes as columns (its lists are emptied).

    Arrival and timeout of each outcome come from the input columns:
    request_ids are unique within the partition (duplicates were rejected).
    """
    request_id = np.array(s.done_ids, dtype=np.int64)
    row = produces.by_id[np.searchsorted(produces.sorted_ids, request_id)]
    arrival = produces.arrival_ms[row]
    timeout = (
        produces.timeout_ms[row]
        if s.timeout_ms is None
        else np.full(len(request_id), s.timeout_ms, dtype=np.int64)
    )
    done_ms = np.array(s.done_ms, dtype=np.int64)
    expired = np.array(s.done_expired, dtype=bool)
    s.done_ids.clear()
    s.done_ms.clear()
    s.done_expired.clear()
    return {
        "request_id": request_id,
        "arrival_ms": arrival,
        "deadline_ms": arrival + timeout,
        "outcome": pc.if_else(pa.array(expired), "expired", "completed"),
        "done_ms": done_ms,
        "latency_ms": done_ms - arrival,
        "timeout_ms": timeout,
        "expired": expired,
    }


def _meta_batch(events: int, ids: set[int] | None) -> pa.RecordBatch:
    """The one meta record of a resolve_batches call (see META_RECORD_SCHEMA)."""
    return _union_batch(
        "meta",
        {
            "worker": [f"{os.uname().nodename}:{os.getpid()}"],
            "accelerated": [bool(tickwheel.USE_EXTENSIONS)],
            "events": [events],
            "ids": [
                None if ids is None else pack_ids(np.fromiter(ids, np.int64, len(ids)))
            ],
        },
        1,
    )


def pack_ids(ids: np.ndarray) -> bytes:
    """Request ids as the meta record's ``ids`` bytes: sorted, delta-encoded, zlib.

    Sorted ids of one task differ by small steps, so their little-endian
    deltas are mostly zero bytes: a million ids take about 1 MB instead of
    8 MB, which is that much less for Spark to write, read back and collect.
    Deltas wrap around int64 as :func:`unpack_ids`'s running sum does, so
    every int64 survives.
    """
    ordered = np.sort(np.asarray(ids, dtype=np.int64))
    deltas = np.diff(ordered, prepend=np.int64(0))
    return zlib.compress(deltas.astype("<i8").tobytes(), 1)


def unpack_ids(blob: bytes) -> np.ndarray:
    """The sorted int64 ids that :func:`pack_ids` packed."""
    deltas = np.frombuffer(zlib.decompress(blob), dtype="<i8")
    return np.cumsum(deltas, dtype=np.int64)


class ReplayResult(NamedTuple):
    """The replay's outputs as Arrow tables."""

    outcomes: pa.Table
    purgatory_size: pa.Table
    rejected: pa.Table
    workers: list[dict[str, Any]]


def split_output(batches: Iterable[pa.RecordBatch]) -> ReplayResult:
    """Split resolve_batches output (the tagged union) into its named tables."""
    union = pa.Table.from_batches(list(batches), schema=OUTPUT_SCHEMA)
    record = union.column("record")

    def part(kind: str) -> pa.Table:
        rows = union.filter(pc.equal(record, kind))
        if kind == "outcome":
            return rows.select(OUTCOME_SCHEMA.names)
        struct = rows.column(kind).combine_chunks()
        schema = RECORD_SCHEMAS[kind]
        return pa.table([struct.field(f.name) for f in schema], schema=schema)

    workers = part("meta").select(META_SCHEMA.names).to_pylist()
    return ReplayResult(part("outcome"), part("size"), part("rejected"), workers)
