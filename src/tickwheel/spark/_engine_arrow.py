"""Arrow plumbing of the replay engine: input batches in, union batches out.

Casting the input to the binding column types, reading columns as numpy
arrays, cutting the input into runs of one partition's rows (or grouping an
input sorted by time only), and assembling batches of the output union.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._engine_schemas import (
    _KIND_FETCH,
    _KIND_NULL,
    _KIND_OTHER,
    _KIND_PRODUCE,
    INPUT_COLUMNS,
    OUTPUT_SCHEMA,
    RECORD_SCHEMAS,
)


def _np(
    column: pa.ChunkedArray | pa.Array, fill: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls replaced by ``fill``, null mask) as numpy arrays."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    values = column.fill_null(fill).to_numpy(zero_copy_only=False)
    return values, nulls


def _kind_codes(column: pa.Array) -> np.ndarray:
    """fetch -> 0, produce -> 1, anything else -> 2, null -> 3.

    ``column`` holds strings, or codes already (0 fetch, 1 produce).
    """
    if pa.types.is_integer(column.type):
        values, nulls = _np(column, fill=_KIND_OTHER)
        codes_in = np.where((values == 0) | (values == 1), values, _KIND_OTHER)
        return np.where(nulls, _KIND_NULL, codes_in).astype(np.int8)
    encoded = column.dictionary_encode()
    lookup = np.array(
        [
            _KIND_FETCH
            if v == "fetch"
            else _KIND_PRODUCE
            if v == "produce"
            else _KIND_OTHER
            for v in encoded.dictionary.to_pylist()
        ]
        + [_KIND_NULL],
        dtype=np.int8,
    )
    indices = encoded.indices.fill_null(len(lookup) - 1).to_numpy(zero_copy_only=False)
    codes: np.ndarray = lookup[indices]
    return codes


def _column(value: Any, dtype: pa.DataType) -> pa.Array:
    """``value`` (Arrow, numpy or a list) as one Arrow array of ``dtype``."""
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        value = value.cast(dtype)
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        return value
    return pa.array(value, dtype)


def _union_batch(record: str, columns: dict[str, Any], n: int) -> pa.RecordBatch:
    """One union batch of ``n`` rows of ``record`` from its named columns.

    ``columns`` holds the fields of ``RECORD_SCHEMAS[record]`` (a missing
    one is null).  Outcomes fill the outcome columns, the other kinds their
    own struct column; every other column is null.
    """
    schema = RECORD_SCHEMAS[record]
    fields = [
        _column(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
        for f in schema
    ]
    arrays = []
    for field in OUTPUT_SCHEMA:
        if field.name == "record":
            arrays.append(pa.repeat(pa.scalar(record, pa.string()), n))
        elif record == "outcome" and field.name in columns:
            arrays.append(fields[schema.get_field_index(field.name)])
        elif field.name == record:
            arrays.append(pa.StructArray.from_arrays(fields, fields=list(schema)))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT_SCHEMA)


def _conform(batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """The eight input columns with their binding types; extra columns are ignored."""
    names = batch.schema.names
    missing = [c for c in INPUT_COLUMNS if c not in names]
    if missing:
        raise ValueError(
            f"events are missing column(s) {missing}; the input schema is "
            f"{list(INPUT_COLUMNS)} (got {names})"
        )
    arrays = []
    for name, dtype in INPUT_COLUMNS.items():
        column = batch.column(name)
        if name == "kind" and pa.types.is_integer(column.type):
            # The Spark glue sends kind as a code (0 fetch, 1 produce).
            arrays.append(pc.cast(column, pa.int8()))
            continue
        if column.type != dtype:
            try:
                column = pc.cast(column, dtype)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise ValueError(
                    f"column {name!r} has type {column.type}, which does not cast "
                    f"to {dtype}: {exc}"
                ) from None
        arrays.append(column)
    return pa.Table.from_arrays(arrays, names=list(INPUT_COLUMNS))


class _PartitionRuns:
    """The conformed input as runs of one partition's rows: ``(name, pieces)``.

    A run ends where the partition changes (a batch boundary does not end
    it); ``events`` counts the rows read so far.
    """

    def __init__(self, batches: Iterable[pa.RecordBatch]) -> None:
        self.batches = batches
        self.events = 0

    def __iter__(self) -> Iterator[tuple[str | None, list[pa.Table]]]:
        pieces: list[pa.Table] = []
        current: str | None = None
        for batch in self.batches:
            table = _conform(batch)
            self.events += table.num_rows
            for key, piece in _split_by_partition(table):
                if pieces and key != current:
                    yield current, pieces
                    pieces = []
                current = key
                pieces.append(piece)
        if pieces:
            yield current, pieces


def _split_by_partition(table: pa.Table) -> Iterator[tuple[str | None, pa.Table]]:
    """Consecutive rows of one partition (None: a null partition), in order."""
    if table.num_rows == 0:
        return
    encoded = table.column("partition").combine_chunks().dictionary_encode()
    keys = encoded.dictionary.to_pylist()
    idx = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.diff(idx)) + 1
    bounds = [0, *starts.tolist(), len(idx)]
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        yield (keys[idx[lo]] if idx[lo] >= 0 else None), table.slice(lo, hi - lo)


def _grouped_by_partition(batches: Iterable[pa.RecordBatch]) -> list[pa.Table]:
    """All of ``batches``, reordered so that each partition's rows are contiguous.

    A stable sort by partition (nulls first): every partition keeps its rows'
    order, i.e. its time order.
    """
    tables = [t for t in (_conform(b) for b in batches) if t.num_rows]
    if not tables:
        return []
    table = pa.concat_tables(tables).combine_chunks()
    encoded = table.column("partition").combine_chunks().dictionary_encode()
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    if len(encoded.dictionary) < 2**15:
        codes = codes.astype(np.int16)  # numpy's stable sort of int16 is a radix sort
    order = np.argsort(codes, kind="stable")
    return [table.take(pa.array(order))]


def _partition_table(
    name: str | None, pieces: list[pa.Table], finished: set[str]
) -> pa.Table:
    """One partition's rows as one table; each partition comes in one run of rows."""
    if name is not None:
        if name in finished:
            raise ValueError(
                f"partition {name!r} appears in two separate runs of rows: the "
                "events must be sorted by (partition, ts_ms, kind)"
            )
        finished.add(name)
    return pa.concat_tables(pieces).combine_chunks()
