"""The replay engine: event-time purgatory replay of ``acks=all`` produce logs.

Spark-free (pyarrow + numpy + tickwheel).  Spark calls :func:`resolve_batches`
inside ``mapInArrow``; :func:`replay_table` runs the same code in one process.

Why
---
A produce log says when each ``acks=all`` request arrived and how far each
follower had replicated at every fetch.  Replaying it through the broker's
own purgatory in *event time* answers which requests completed, when, which
timed out, and how large the purgatory grew, and it answers "what if" by
replaying again under another ``request.timeout.ms`` or
``replica.lag.time.max.ms``.  The replay is discrete-event simulation on
:class:`~tickwheel.MockTimer`: the clock jumps from event to event, and every
timeout in between fires in deadline order at its exact deadline.

Per topic-partition (its events are sorted by ``(ts_ms, kind)``):

* a :class:`~tickwheel.kafka.Partition` holds the leader's log end offset
  (LEO, the largest ``required_offset`` so far), each follower's LEO (0 until
  its first fetch) and the ISR; the followers are the replicas that appear in
  the partition's fetches;
* for each timeout setting, a :class:`~tickwheel.purgatory.DelayedOperationPurgatory`
  on its own MockTimer holds one :class:`~tickwheel.kafka.DelayedProduce` per
  request, watched under the partition's name (Kafka's watch key); when the
  high watermark (the smallest LEO of the in-sync followers) rises past the
  smallest pending ``required_offset`` (a heap of them), the engine calls
  ``check_and_complete``, so a fetch costs O(1) unless it completes something;
* with ``replica_lag_max_ms``, a second MockTimer holds one lag timer per
  follower: started when a produce leaves it behind the leader, cancelled when
  a fetch catches it up, and, if it fires, the follower leaves the ISR (the
  high watermark may jump and requests complete).  A follower that catches up
  rejoins the ISR.

Event order at one millisecond ``T``: the clock first reaches ``T`` (requests
whose deadline is ``T`` expire, then lag timers due at ``T`` fire), then the
fetches at ``T`` apply, then the produces.  So a fetch (or an ISR shrink) at
exactly a request's deadline is too late.  After the last event the clock
runs on until every request has completed or expired.

Worked example: one follower that reaches offset 10 at t=8; request 1 needs
offset 10 (completes at 8), request 2 needs offset 20 and times out at 15.

>>> import pyarrow as pa
>>> from tickwheel.spark.trace import EVENT_SCHEMA
>>> def produce(ts, request_id, offset, timeout):
...     return dict(ts_ms=ts, partition="p", kind="produce", request_id=request_id,
...                 required_offset=offset, timeout_ms=timeout)
>>> rows = [
...     produce(0, 1, 10, 100),
...     produce(5, 2, 20, 10),
...     dict(ts_ms=8, partition="p", kind="fetch", replica=1, fetch_offset=10),
... ]
>>> out = replay_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA))
>>> for row in out.outcomes.select(["request_id", "outcome", "done_ms"]).to_pylist():
...     print(row)
{'request_id': 1, 'outcome': 'completed', 'done_ms': 8}
{'request_id': 2, 'outcome': 'expired', 'done_ms': 15}
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import tickwheel
from tickwheel import MockTimer, _impl
from tickwheel.kafka import DelayedProduce, Partition
from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory
from tickwheel.spark import _arrow

__all__ = [
    "INPUT_COLUMNS",
    "OUTCOME_SCHEMA",
    "OUTPUT_SCHEMA",
    "REJECTED_SCHEMA",
    "SIZE_SCHEMA",
    "ReplayResult",
    "normalize_timeouts",
    "replay_table",
    "resolve_batches",
    "split_output",
]

logger = logging.getLogger("tickwheel.spark")

#: The event loop: ``_replay.pyx`` compiled, or its reference ``_replay_py.py``.
_loop = _impl.select("spark._replay")

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


# -- settings ----------------------------------------------------------------------
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


# -- the produce operation ----------------------------------------------------------
class ReplayProduce(DelayedProduce):
    """A DelayedProduce built from pre-validated columns (no per-call checks).

    The engine validates whole columns with numpy before the loop, so this
    constructor only fills the slots :class:`~tickwheel.kafka.DelayedProduce`
    defines; completion (``try_complete``/``on_complete``) is inherited as is.
    The replay loops inline it (``_new_operation`` then the same stores, or
    ``_new_produce`` in C): a type call and an ``__init__`` frame were half
    the cost of an operation.
    """

    __slots__ = ()

    def __init__(  # noqa: PLR0913 - mirrors DelayedProduce's fields
        self,
        partition: Partition,
        required_offset: int,
        timeout_ms: int,
        arrival_ms: int,
        request_id: int,
        clock: Callable[[], int],
        callback: Callable[[DelayedProduce], Any],
    ) -> None:
        DelayedOperation.__init__(self, timeout_ms)
        self.partition = partition
        self.required_offset = required_offset
        self.timeout_ms = timeout_ms
        self.arrival_ms = arrival_ms
        self.done_ms = None
        self.outcome = None
        self.error = None
        self.request_id = request_id
        self._clock = clock
        self._callback = callback


class _Setting:
    """One timeout setting of one partition: its MockTimer, purgatory and outcomes.

    Each request's outcome is recorded by ``record`` (the operation's
    completion callback) as three column entries, in completion order, and
    the operation itself is not kept: it is freed as soon as the purgatory
    and the timer let go of it.  Keeping a million operations (each with its
    lock) until a partition's outputs are built cost more than recording.
    """

    __slots__ = (
        "timeout_ms",
        "timer",
        "purgatory",
        "clock",
        "done_ids",
        "done_ms",
        "done_expired",
        "record",
    )

    def __init__(
        self, name: str, timeout_ms: int | None, start_ms: int, loop: ModuleType
    ) -> None:
        self.timeout_ms = timeout_ms
        self.timer = MockTimer(start_ms=start_ms)
        # ``lambda: timer.now_ms`` without a Python frame per call (one call
        # per completed or expired request).
        self.clock: Callable[[], int] = loop.clock(self.timer)
        self.purgatory = DelayedOperationPurgatory(f"Produce-{name}", self.timer)
        self.done_ids: list[int] = []
        self.done_ms: list[int] = []
        self.done_expired: list[bool] = []
        self.record: Callable[[DelayedProduce], None] = loop.recorder(
            self.done_ids, self.done_ms, self.done_expired
        )


# -- one partition -------------------------------------------------------------------
class _PartitionReplay:
    """Replays the valid events of one topic-partition (see the module docstring).

    Requests are watched under the partition's name, Kafka's watch key.  As
    in Kafka, ``check_and_complete`` runs only when the high watermark rises,
    and here only when it rises past the smallest offset still awaited (a
    heap of pending required offsets, with lazy deletion of expired ones), so a
    fetch that completes nothing costs O(1).
    """

    def __init__(
        self,
        name: str,
        followers: Iterable[int],
        settings: list[int | None],
        lag_ms: int | None,
        start_ms: int,
        check: bool = False,
        loop: ModuleType | None = None,
    ) -> None:
        self.loop = _loop if loop is None else loop
        self.name = name
        self.partition = Partition(name, followers)
        self.settings = [_Setting(name, t, start_ms, self.loop) for t in settings]
        self.timers = [s.timer for s in self.settings]
        self.lag_ms = lag_ms
        self.isr_timer = MockTimer(start_ms=start_ms) if lag_ms is not None else None
        self.lag_tasks: dict[int, Any] = {}
        #: The required offsets still awaited (the loop module's OffsetHeap).
        self.heap = self.loop.OffsetHeap()
        self.now = start_ms
        self.check = check
        self.samples: list[tuple[int, list[int]]] = []
        self.shrinks = 0
        self.rejoins = 0

    # ISR ---------------------------------------------------------------------
    def _hw(self) -> float:
        """The high watermark of the in-sync followers (inf when the ISR is empty)."""
        # Partition keeps it up to date (the smallest LEO in the ISR).
        return self.partition._acked_to

    def _complete_up_to(self, hw: float) -> None:
        """The HW reached ``hw`` >= the smallest awaited offset: complete what waits."""
        self.heap.pop_up_to(hw)
        name = self.name
        for s in self.settings:
            s.purgatory.check_and_complete(name)

    def _shrink(self, replica: int) -> None:
        # A lag timer fired: the follower has not caught up for lag_ms.
        self.lag_tasks.pop(replica, None)
        self.partition.shrink_isr(replica)
        self.shrinks += 1
        if self.heap:
            hw = self._hw()
            if hw >= self.heap.smallest():
                self._complete_up_to(hw)

    def _follower_changed(self, replica: int) -> None:
        """Start, keep or cancel the follower's lag timer; rejoin it once caught up."""
        part = self.partition
        if part._leos[replica] >= part.leader_leo:
            task = self.lag_tasks.pop(replica, None)
            if task is not None:
                task.cancel()
            if replica not in part._isr:
                # Caught up, so its LEO is >= every required offset: rejoining
                # never holds back a request.
                part.expand_isr(replica)
                self.rejoins += 1
        elif replica in part._isr and replica not in self.lag_tasks:
            assert self.isr_timer is not None and self.lag_ms is not None
            self.lag_tasks[replica] = self.isr_timer.schedule(
                self.lag_ms, self._shrink, replica
            )

    # clock -------------------------------------------------------------------
    def advance_to(self, t: int) -> None:
        """Move every clock to ``t``; at each ms, expirations come before lag timers."""
        timers = self.timers
        isr_timer = self.isr_timer
        if isr_timer is not None:
            while True:
                nxt = isr_timer.next_expiration_ms
                if nxt is None or nxt > t:
                    break
                # A bucket of a coarse wheel level can start before now (the
                # wheel's levels move only when something is due): polling it
                # at now cascades its lag timers, which are all due later.
                nxt = max(nxt, self.now)
                for timer in timers:
                    timer.advance_to(nxt)
                isr_timer.advance_to(nxt)
            isr_timer.advance_to(t)
        for timer in timers:
            nxt = timer.next_expiration_ms
            if nxt is not None and nxt <= t:
                timer.advance_to(t)
            else:
                # Nothing due: just move the manual clock (what advance_to
                # would do, without its bookkeeping).
                timer.now_ns = t * 1_000_000
        self.now = t

    def finish(self) -> None:
        """Run the clock on until every request has completed or expired."""
        while True:
            due = [
                nxt
                for nxt in (s.timer.next_expiration_ms for s in self.settings)
                if nxt is not None
            ]
            if not due:
                break
            self.advance_to(max(max(due), self.now))
        if self.isr_timer is not None:
            self.isr_timer.close()
        for s in self.settings:
            if self.check:
                s.purgatory._check()
                if s.purgatory.delayed:
                    raise AssertionError(f"{s.purgatory.delayed} left in {self.name!r}")
            s.purgatory.shutdown()
            s.timer.close()

    def run(self, ts: np.ndarray, is_fetch: np.ndarray, first: np.ndarray,
            second: np.ndarray, timeouts: np.ndarray) -> None:  # fmt: skip
        """Replay the events in order, then run the clock out (see ``_replay_py.run``).

        The collector is off meanwhile: live operations are young objects it
        would rescan again and again, and none of them is part of a cycle
        (see _Setting), so it has nothing to collect here.
        """
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            self.loop.run(
                self,
                ReplayProduce,
                np.ascontiguousarray(ts, dtype=np.int64),
                np.ascontiguousarray(is_fetch, dtype=np.uint8),
                np.ascontiguousarray(first, dtype=np.int64),
                np.ascontiguousarray(second, dtype=np.int64),
                np.ascontiguousarray(timeouts, dtype=np.int64),
            )
            self.finish()
        finally:
            if gc_was_enabled:
                gc.enable()


# -- columns in, columns out ------------------------------------------------------
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


# -- the engine ---------------------------------------------------------------
_logged_accelerated = False


def _log_accelerated_once() -> None:
    """Log once per executor (one Python daemon) whether the compiled core is in use."""
    global _logged_accelerated
    if _logged_accelerated:
        return
    _logged_accelerated = True
    if os.environ.get("TICKWHEEL_ENGINE_QUIET"):
        return  # tickwheel replay reports the engine mode in its own output
    # Spark's Python workers are forks of one daemon per executor: a marker
    # file named after the daemon's pid makes the first worker the only one
    # that logs.  Outside Spark the parent is simply this process's parent.
    marker = os.path.join(
        os.environ.get("TMPDIR", "/tmp"), f"tickwheel-engine-{os.getppid()}.logged"
    )
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
    except FileExistsError:
        return
    except OSError:
        pass  # no writable temp dir: log from every worker instead
    message = (
        f"tickwheel {tickwheel.__version__} replay engine on pid {os.getpid()}: "
        + (
            "accelerated (compiled core, purgatory and event loop)"
            if tickwheel.USE_EXTENSIONS
            else "pure Python (compiled core not in use: TICKWHEEL_NO_EXTENSIONS "
            "or no wheel for this platform)"
        )
    )
    if not logger.handlers and not logging.getLogger().handlers:
        print(message, file=sys.stderr, flush=True)
    else:
        logger.info(message)


def resolve_batches(
    batches: Iterable[pa.RecordBatch],
    timeout_ms: int | Sequence[int] | None = None,
    replica_lag_max_ms: int | None = None,
    *,
    check: bool = False,
    report_ids: bool = False,
    sorted_by: str = "partition",
) -> Iterator[pa.RecordBatch]:
    """Replay sorted events through one MockTimer-driven purgatory per partition.

    The input holds the eight event columns (see :data:`INPUT_COLUMNS`; other
    columns are ignored), sorted by ``(partition, ts_ms, kind)``: each
    partition's rows contiguous, in time order, fetches before produces at a
    tie.  With ``sorted_by="time"`` the input need only be sorted by
    ``(ts_ms, kind)``, partitions interleaved: the engine then holds the whole
    input and groups it by partition (a stable sort, so each partition keeps
    its time order) before replaying; memory grows with the input instead of
    with the largest partition.  Malformed rows may appear anywhere: they are
    not replayed but returned as ``rejected`` records with a reason.  A
    request_id seen twice by this call is a ``duplicate request_id`` from its
    second row on (the callers :func:`replay_table` and
    ``tickwheel.spark.resolve`` reject every row of an id that occurs twice
    anywhere, before the engine runs).

    Yields :data:`OUTPUT_SCHEMA` batches: ``record`` tells outcome, size
    (purgatory size per second), rejected, or meta (one per call: the
    worker and whether it ran accelerated).

    Runtime complexity: O(events + requests x settings x timer levels), plus
    O(log pending) per completed request.

    :param batches: Arrow record batches of events (sorted as above)
    :param timeout_ms: None to use each row's ``timeout_ms``; an int or a
        sequence of ints to replay under each of these timeouts in one pass
    :param replica_lag_max_ms: None for a fixed ISR (every follower in sync);
        else a follower that has not caught up with the leader for this long
        leaves the ISR until it catches up
    :param check: run the purgatories' invariant checks (for tests; slower)
    :param report_ids: put the replayed request_ids in the meta record (for a
        driver-side duplicate check across calls)
    :param sorted_by: ``"partition"`` (the input is sorted by ``(partition,
        ts_ms, kind)``: streamed, one partition in memory at a time) or
        ``"time"`` (sorted by ``(ts_ms, kind)`` within each partition,
        partitions in any interleaving: held whole and grouped)
    :raises ValueError: if a partition's rows are not sorted by (ts_ms, kind)
        or, with ``sorted_by="partition"``, not contiguous; if a setting is
        out of range or ``sorted_by`` is neither value
    :raises TypeError: for a non-int setting
    """
    settings = normalize_timeouts(timeout_ms)
    lag_ms = _check_lag(replica_lag_max_ms)
    if sorted_by not in ("partition", "time"):
        raise ValueError(f"sorted_by must be 'partition' or 'time', got {sorted_by!r}")
    if sorted_by == "time":
        batches = _grouped_by_partition(batches)
    _log_accelerated_once()
    seen_ids: set[int] = set()
    finished: set[str] = set()
    runs = _PartitionRuns(batches)
    for name, pieces in runs:
        yield from _flush(name, pieces, settings, lag_ms, seen_ids, finished, check)
    yield _meta_batch(runs.events, seen_ids if report_ids else None)


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


def _flush(
    name: str | None,
    pieces: list[pa.Table],
    settings: list[int | None],
    lag_ms: int | None,
    seen_ids: set[int],
    finished: set[str],
    check: bool,
) -> Iterator[pa.RecordBatch]:
    """Validate and replay one partition's rows; yield its output batches."""
    table = _partition_table(name, pieces, finished)
    columns = _EventColumns.of(table)
    code = _reason_codes(name, columns, seen_ids)
    valid = code == 0
    if not valid.all():
        yield _rejected_batch(table, code)
    if not valid.any():
        return
    assert name is not None  # a null partition's rows are all rejected
    events = columns.replayed(valid)
    _check_sorted(name, events)
    followers = np.unique(columns.rep[valid & columns.fetch]).tolist()
    replay = _PartitionReplay(
        name, followers, settings, lag_ms, int(events.ts[0]), check
    )
    replay.run(*events)
    yield from _output_batches(replay, events, check)


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


def purgatory_sizes(
    arrival_ms: np.ndarray, done_ms: np.ndarray, expired: np.ndarray
) -> dict[str, np.ndarray]:
    """Per second of event time: pending requests at its end and at most, and counts.

    A request is pending from its arrival until ``done_ms`` (a request that
    completes at once is never pending).  Within one millisecond, requests
    leave before new ones arrive (the replay's event order).  A row is made for
    every second with an arrival or a completion, and for every second in
    which requests were pending.

    >>> s = purgatory_sizes(np.array([0, 500, 1500]), np.array([2500, 500, 1600]),
    ...                     np.array([True, False, False]))
    >>> {k: v.tolist() for k, v in s.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'window_start_ms': [0, 1000, 2000], 'pending_end': [1, 1, 0],
     'pending_max': [1, 2, 1], 'arrivals': [2, 1, 0], 'completed': [1, 1, 0],
     'expired': [0, 0, 1]}
    """
    arrival_ms = np.asarray(arrival_ms, dtype=np.int64)
    done_ms = np.asarray(done_ms, dtype=np.int64)
    expired = np.asarray(expired, dtype=bool)
    wait = done_ms > arrival_ms
    a_sorted = np.sort(arrival_ms[wait])
    d_sorted = np.sort(done_ms[wait])
    sec_a = np.floor_divide(arrival_ms, 1000)
    sec_d = np.floor_divide(done_ms, 1000)
    active = np.unique(np.concatenate([sec_a, sec_d]))
    if not len(active):
        return {k: np.zeros(0, dtype=np.int64) for k in _SIZE_COLUMNS}
    secs, pending_end = _pending_at_second_ends(active, a_sorted, d_sorted)
    pending_max = _pending_max(secs, pending_end, a_sorted, d_sorted)
    n_secs = len(secs)
    arrivals = np.bincount(np.searchsorted(secs, sec_a), minlength=n_secs)
    completed = np.bincount(np.searchsorted(secs, sec_d[~expired]), minlength=n_secs)
    expired_n = np.bincount(np.searchsorted(secs, sec_d[expired]), minlength=n_secs)
    return {
        "window_start_ms": secs * 1000,
        "pending_end": pending_end.astype(np.int64),
        "pending_max": pending_max.astype(np.int64),
        "arrivals": arrivals.astype(np.int64),
        "completed": completed.astype(np.int64),
        "expired": expired_n.astype(np.int64),
    }


_SIZE_COLUMNS = ("window_start_ms", "pending_end", "pending_max", "arrivals",
                 "completed", "expired")  # fmt: skip


def _pending_at_second_ends(
    active: np.ndarray, a_sorted: np.ndarray, d_sorted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The seconds to report and the requests pending at the end of each.

    ``active``: the seconds with an arrival or a completion; the seconds in
    between with requests pending are added (constant: no arrivals or
    completions in them).  ``a_sorted``/``d_sorted``: the sorted arrival and
    done times of the requests that waited.
    """
    end = active * 1000 + 999  # after the second's last millisecond
    pend_end = np.searchsorted(a_sorted, end, "right") - np.searchsorted(
        d_sorted, end, "right"
    )
    gaps = np.diff(active) - 1
    carry = (pend_end[:-1] > 0) & (gaps > 0)
    fill_counts = np.where(carry, gaps, 0)
    fill_start = np.repeat(active[:-1] + 1, fill_counts)
    fill_offset = np.arange(fill_counts.sum()) - np.repeat(
        np.cumsum(fill_counts) - fill_counts, fill_counts
    )
    fill_secs = fill_start + fill_offset
    fill_pend = np.repeat(pend_end[:-1], fill_counts)
    secs = np.concatenate([active, fill_secs])
    pending_end = np.concatenate([pend_end, fill_pend])
    order = np.argsort(secs, kind="stable")
    return secs[order], pending_end[order]


def _pending_max(
    secs: np.ndarray,
    pending_end: np.ndarray,
    a_sorted: np.ndarray,
    d_sorted: np.ndarray,
) -> np.ndarray:
    """The most requests pending within each second of ``secs``.

    It is the level at the second's start, or right after an arrival in it.
    """
    start_level = np.concatenate([[0], pending_end[:-1]])
    start_level[1:][np.diff(secs) > 1] = 0
    pending_max = start_level.copy()
    times = np.concatenate([a_sorted, d_sorted])
    deltas = np.concatenate(
        [np.ones(len(a_sorted), np.int64), -np.ones(len(d_sorted), np.int64)]
    )
    o = np.lexsort((deltas, times))
    level = np.cumsum(deltas[o])
    up = deltas[o] > 0
    up_secs = np.floor_divide(times[o][up], 1000)
    np.maximum.at(pending_max, np.searchsorted(secs, up_secs), level[up])
    result: np.ndarray = np.maximum(pending_max, pending_end)
    return result


def _check_sizes(
    replay: _PartitionReplay, s: _Setting, arrival: np.ndarray, done_ms: np.ndarray
) -> None:
    """Check mode: lifetimes agree with ``purgatory.delayed`` sampled in the replay."""
    index = replay.settings.index(s)
    wait = done_ms > arrival
    a_sorted = np.sort(arrival[wait])
    d_sorted = np.sort(done_ms[wait])
    for t, delayed in replay.samples:
        expect = int(
            np.searchsorted(a_sorted, t, "right")
            - np.searchsorted(d_sorted, t, "right")
        )
        if expect != delayed[index]:
            raise AssertionError(
                f"{replay.name!r} at {t}: purgatory.delayed={delayed[index]}, "
                f"lifetimes say {expect}"
            )


# -- single-process driver ------------------------------------------------------------
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


def replay_table(
    events: pa.Table,
    timeout_ms: int | Sequence[int] | None = None,
    replica_lag_max_ms: int | None = None,
    *,
    check: bool = False,
    batch_rows: int = 65_536,
) -> ReplayResult:
    """Replay an events table in this process (the Spark job's single-core twin).

    Every row of a request_id that occurs in two produce rows is rejected as a
    ``duplicate request_id``; the rest is sorted by (partition, ts_ms, kind)
    and passed to :func:`resolve_batches`.

    :param events: a table with the input columns (any row order)
    :param timeout_ms, replica_lag_max_ms, check: see :func:`resolve_batches`
    :param batch_rows: rows per batch handed to the engine
    :return: outcomes, purgatory_size and rejected tables, and the meta records
    :raises ValueError: for missing or uncastable columns, or bad settings
    """
    normalize_timeouts(timeout_ms)
    _check_lag(replica_lag_max_ms)
    table = _conform(events)
    dup = duplicate_mask(table)
    extra: list[pa.RecordBatch] = []
    if dup.any():
        rows = table.filter(pa.array(dup))
        columns: dict[str, Any] = {c: rows.column(c) for c in INPUT_COLUMNS}
        columns["reason"] = ["duplicate request_id"] * rows.num_rows
        extra.append(_union_batch("rejected", columns, rows.num_rows))
        table = table.filter(pa.array(~dup))
    order = _arrow.sort_indices(
        table,
        [("partition", "ascending"), ("ts_ms", "ascending"), ("kind", "ascending")],
        "at_start",
    )
    table = table.take(order)
    out = list(
        resolve_batches(
            table.to_batches(max_chunksize=batch_rows),
            timeout_ms,
            replica_lag_max_ms,
            check=check,
        )
    )
    return split_output(extra + out)
