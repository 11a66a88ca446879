"""The replay engine: event-time purgatory replay of ``acks=all`` produce logs.

Spark-free (pyarrow + numpy + tickwheel).  Spark calls :func:`resolve_batches`
inside ``mapInArrow``; :func:`replay_table` runs the same code in one process.

This module drives the replay; each concern has a module of its own:
``_engine_schemas`` (the columns and records), ``_engine_arrow`` (Arrow
batches in and out), ``_engine_checks`` (the settings and each row),
``_engine_sim`` (one partition's simulation), ``_engine_sizes`` (the
purgatory's size per second) and ``_engine_output`` (the records it yields).

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

import logging
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

import tickwheel
from tickwheel.spark import _arrow

# Each concern has a module of its own; the Spark glue, the CLI and the
# tests also import from here what they always have (noqa F401: those
# names are re-exported, not used here).
from ._engine_arrow import (
    _conform,
    _grouped_by_partition,
    _partition_table,
    _PartitionRuns,
    _union_batch,
)
from ._engine_checks import (
    _check_lag,
    _check_sorted,
    _EventColumns,
    _reason_codes,
    duplicate_mask,
    normalize_timeouts,
)
from ._engine_output import (  # noqa: F401
    ReplayResult,
    _meta_batch,
    _output_batches,
    _rejected_batch,
    pack_ids,
    split_output,
    unpack_ids,
)
from ._engine_schemas import (  # noqa: F401
    INPUT_COLUMNS,
    MAX_TIME_MS,
    OUTCOME_SCHEMA,
    OUTPUT_SCHEMA,
    RECORD_SCHEMAS,
    REJECT_REASONS,
    REJECTED_SCHEMA,
    SIZE_SCHEMA,
)
from ._engine_sim import ReplayProduce, _PartitionReplay  # noqa: F401
from ._engine_sizes import purgatory_sizes  # noqa: F401

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
