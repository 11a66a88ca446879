"""Validation in the replay engine: the settings, and each input row.

The timeout and lag settings are checked before anything runs.  A
partition's rows are checked column by column with numpy (each row gets the
first reason it fails, or 0), duplicates of a request_id are found, and the
valid rows are checked to be in the replay's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._engine_arrow import _kind_codes, _np
from ._engine_schemas import (
    _KIND_FETCH,
    _KIND_NULL,
    _KIND_OTHER,
    _KIND_PRODUCE,
    _REASONS,
    MAX_TIME_MS,
)


def normalize_timeouts(timeout_ms: int | Sequence[int] | None) -> list[int | None]:
    """The timeout settings to replay: ``[None]`` means each row's own ``timeout_ms``.

    >>> normalize_timeouts(None), normalize_timeouts(500)
    ([None], [500])
    >>> normalize_timeouts([30_000, 5_000])
    [30000, 5000]

    :raises TypeError, ValueError: for a non-int, negative, out-of-range or
        repeated timeout, or an empty sequence
    """
    if timeout_ms is None:
        return [None]
    values = [timeout_ms] if not isinstance(timeout_ms, Sequence) else list(timeout_ms)
    if not values:
        raise ValueError(f"timeout_ms must not be empty, got {timeout_ms!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"timeout_ms must be ints, got {timeout_ms!r}")
        if not 0 <= value <= MAX_TIME_MS:
            raise ValueError(
                f"timeout_ms must be in [0, {MAX_TIME_MS}], got {timeout_ms!r}"
            )
    if len(set(values)) != len(values):
        raise ValueError(f"timeout_ms has repeated values: {timeout_ms!r}")
    return [int(v) for v in values]


def _check_lag(replica_lag_max_ms: int | None) -> int | None:
    if replica_lag_max_ms is None:
        return None
    if isinstance(replica_lag_max_ms, bool) or not isinstance(
        replica_lag_max_ms, (int, np.integer)
    ):
        raise TypeError(
            f"replica_lag_max_ms must be an int or None, got {replica_lag_max_ms!r}"
        )
    if not 1 <= replica_lag_max_ms <= MAX_TIME_MS:
        raise ValueError(
            f"replica_lag_max_ms must be in [1, {MAX_TIME_MS}], "
            f"got {replica_lag_max_ms!r}"
        )
    return int(replica_lag_max_ms)


class _Events(NamedTuple):
    """One partition's valid events: the loop's five columns (``_replay_py.run``)."""

    ts: np.ndarray
    is_fetch: np.ndarray
    first: np.ndarray  # replica (fetch) or request_id (produce)
    second: np.ndarray  # fetch_offset (fetch) or required_offset (produce)
    timeouts: np.ndarray  # the row's timeout_ms (produce)


class _EventColumns(NamedTuple):
    """A partition's input columns as numpy values (nulls filled) and null masks."""

    ts: np.ndarray
    ts_null: np.ndarray
    kind: np.ndarray
    rid: np.ndarray
    rid_null: np.ndarray
    req: np.ndarray
    req_null: np.ndarray
    tmo: np.ndarray
    tmo_null: np.ndarray
    rep: np.ndarray
    rep_null: np.ndarray
    fo: np.ndarray
    fo_null: np.ndarray

    @classmethod
    def of(cls, table: pa.Table) -> _EventColumns:
        """The columns of a conformed table (see :func:`_conform`)."""
        ts, ts_null = _np(table.column("ts_ms"))
        kind = _kind_codes(table.column("kind").combine_chunks())
        rid, rid_null = _np(table.column("request_id"))
        req, req_null = _np(table.column("required_offset"))
        tmo, tmo_null = _np(table.column("timeout_ms"))
        rep, rep_null = _np(table.column("replica"))
        fo, fo_null = _np(table.column("fetch_offset"))
        return cls(ts, ts_null, kind, rid, rid_null, req, req_null, tmo, tmo_null,
                   rep, rep_null, fo, fo_null)  # fmt: skip

    @property
    def produce(self) -> np.ndarray:
        mask: np.ndarray = self.kind == _KIND_PRODUCE
        return mask

    @property
    def fetch(self) -> np.ndarray:
        mask: np.ndarray = self.kind == _KIND_FETCH
        return mask

    def replayed(self, valid: np.ndarray) -> _Events:
        """The valid rows as the loop's columns."""
        fetch = self.fetch
        return _Events(
            self.ts[valid],
            fetch[valid],
            np.where(fetch, self.rep, self.rid)[valid],
            np.where(fetch, self.fo, self.req)[valid],
            self.tmo[valid],
        )


def _reason_codes(name: str | None, c: _EventColumns, seen_ids: set[int]) -> np.ndarray:
    """Per row, the index in ``_REASONS`` of the first check it fails (0: valid)."""
    code = np.zeros(len(c.ts), dtype=np.int8)

    def mark(condition: Any, reason: str) -> None:
        code[np.logical_and(condition, code == 0)] = _REASONS.index(reason)

    produce, fetch = c.produce, c.fetch
    if name is None:
        code[:] = _REASONS.index("null partition")
    mark(c.kind == _KIND_NULL, "null kind")
    mark(c.kind == _KIND_OTHER, "unknown kind")
    mark(c.ts_null, "null ts_ms")
    # Not np.abs: it overflows (stays negative) for -2**63.
    mark((c.ts > MAX_TIME_MS) | (c.ts < -MAX_TIME_MS), "ts_ms out of range")
    mark(produce & c.rid_null, "null request_id")
    mark(produce & c.req_null, "null required_offset")
    mark(produce & c.tmo_null, "null timeout_ms")
    mark(produce & (c.tmo < 0), "negative timeout_ms")
    mark(produce & (c.req < 0), "negative required_offset")
    deadline = c.ts + np.minimum(c.tmo, MAX_TIME_MS)
    mark(
        produce & ((c.tmo > MAX_TIME_MS) | (deadline > MAX_TIME_MS)),
        "timeout_ms out of range",
    )
    mark(fetch & c.rep_null, "null replica")
    mark(fetch & c.fo_null, "null fetch_offset")
    mark(fetch & (c.fo < 0), "negative fetch_offset")
    _mark_duplicates(code, np.flatnonzero(produce & (code == 0)), c.rid, seen_ids)
    return code


def _mark_duplicates(
    code: np.ndarray, ok_produce: np.ndarray, rid: np.ndarray, seen_ids: set[int]
) -> None:
    """Duplicates: an id already seen by this engine, or earlier in this partition."""
    if not len(ok_produce):
        return
    ids = rid[ok_produce]
    _, first_index = np.unique(ids, return_index=True)
    dup = np.ones(len(ids), dtype=bool)
    dup[first_index] = False
    id_list = ids.tolist()
    if seen_ids and not seen_ids.isdisjoint(id_list):
        # Rare: look ids up one by one only when some id was seen before.
        dup |= np.fromiter((i in seen_ids for i in id_list), bool, len(ids))
    code[ok_produce[dup]] = _REASONS.index("duplicate request_id")
    seen_ids.update(ids[~dup].tolist())


def _check_sorted(name: str, events: _Events) -> None:
    """Raise ValueError unless the events are in the replay's order.

    The order: time, then fetches (kind 0) before produces (kind 1).
    """
    ts, fetch = events.ts, events.is_fetch
    if len(ts) < 2:
        return
    dt = np.diff(ts)
    kind = np.where(fetch, _KIND_FETCH, _KIND_PRODUCE)
    unsorted = (dt < 0) | ((dt == 0) & (np.diff(kind) < 0))
    if unsorted.any():
        at = int(np.flatnonzero(unsorted)[0])
        raise ValueError(
            f"events of partition {name!r} are not sorted by (ts_ms, kind): "
            f"ts_ms {int(ts[at])} ({'fetch' if fetch[at] else 'produce'}) comes "
            f"before ts_ms {int(ts[at + 1])} "
            f"({'fetch' if fetch[at + 1] else 'produce'})"
        )


def duplicate_mask(table: pa.Table) -> np.ndarray:
    """Rows that are produces whose request_id occurs in more than one produce row."""
    produce = pc.fill_null(pc.equal(table.column("kind"), "produce"), False)
    ids = table.column("request_id").filter(produce).drop_null()
    counts = pc.value_counts(ids)
    dups = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(dups) == 0:
        return np.zeros(table.num_rows, dtype=bool)
    hit = pc.fill_null(pc.is_in(table.column("request_id"), value_set=dups), False)
    return np.asarray(pc.and_(produce, hit).to_numpy(zero_copy_only=False), dtype=bool)
