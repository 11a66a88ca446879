"""Synthetic ``acks=all`` produce logs for the event-time replay (no Spark needed).

Why
---
The replay needs realistic input that anyone can make without a Kafka
cluster: a Poisson stream of produce requests per partition, and for every
follower the times at which its fetches brought it each appended offset.
The model is deliberately small:

* partitions get unequal shares of the traffic (log-normal weights), and
  arrivals on each are a Poisson process (exponential gaps, whole ms);
* each produce appends ``1 + Geometric`` records; its ``required_offset`` is
  the leader's log end offset after the append;
* most partitions have two followers (replication factor 3); every
  ``rf1_every``-th partition has none (replication factor 1);
* a follower copies appends in order, each after a log-normal delay; all the
  appends that reach it at the same millisecond arrive in one fetch, whose
  ``fetch_offset`` is the follower's new log end offset;
* a few followers are *slow*: longer delays and stall episodes (a GC pause,
  a saturated disk) during which nothing arrives; at the end of a stall the
  follower catches up in one fetch.  They cause the timeouts and, with
  ``replica_lag_max_ms``, the ISR shrinks and rejoins the replay reports.

Worked example: 1,000 requests over 4 partitions, as an Arrow table with the
replay's input schema.

>>> table = generate_trace(1_000, 4, seed=7)
>>> table.schema.names  # doctest: +NORMALIZE_WHITESPACE
['ts_ms', 'partition', 'kind', 'request_id', 'required_offset', 'timeout_ms',
 'replica', 'fetch_offset']
>>> int(pc_count(table, "produce")), table.num_rows > 1_000
(1000, True)
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["EVENT_SCHEMA", "generate_trace", "write_trace"]

#: The binding input schema of the replay (one row per event).
EVENT_SCHEMA = pa.schema(
    [
        pa.field("ts_ms", pa.int64()),
        pa.field("partition", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("request_id", pa.int64()),
        pa.field("required_offset", pa.int64()),
        pa.field("timeout_ms", pa.int64()),
        pa.field("replica", pa.int32()),
        pa.field("fetch_offset", pa.int64()),
    ]
)

_BROKERS = 6


def pc_count(table: pa.Table, kind: str) -> int:
    """Number of rows of ``kind`` in an events table (a small doctest helper)."""
    return int(pc.sum(pc.equal(table["kind"], kind)).as_py() or 0)


def _check_positive(value: object, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def generate_trace(
    requests: int,
    partitions: int,
    *,
    seed: int = 0,
    rate_per_s: float = 20_000.0,
    start_ms: int = 1_700_000_000_000,
    timeouts_ms: tuple[int, ...] = (30_000, 30_000, 30_000, 30_000, 5_000),
    median_delay_ms: float = 3.0,
    slow_followers: int | None = None,
    rf1_every: int = 16,
) -> pa.Table:
    """Make a synthetic events table (see the module docstring for the model).

    Runtime complexity: O(events log events) in numpy.

    :param requests: number of produce requests (>= 1)
    :param partitions: number of topic-partitions (>= 1)
    :param seed: random seed (same seed, same table)
    :param rate_per_s: produce requests per second over all partitions
    :param start_ms: event time of the trace's start (epoch ms)
    :param timeouts_ms: each request's ``timeout_ms`` is drawn uniformly from these
    :param median_delay_ms: median replication delay of a healthy follower
    :param slow_followers: how many followers are slow (default: about 1 in 20
        partitions, at least 1)
    :param rf1_every: every this-many-th partition has no followers (0: none)
    :return: a table with :data:`EVENT_SCHEMA`, sorted by (ts_ms, partition, kind)
    :raises TypeError, ValueError: for a non-int or out-of-range argument
    """
    slow_followers = _check_trace_args(
        requests, partitions, rate_per_s, timeouts_ms, slow_followers, rf1_every
    )
    # The draws happen in a fixed order (same seed, same table): the plan,
    # then per partition its produces and its followers' fetches.
    rng = np.random.default_rng(seed)
    weights, counts, has_followers, slow = _plan(
        rng, requests, partitions, slow_followers, rf1_every
    )
    columns = _Columns()
    timeouts = np.asarray(timeouts_ms, dtype=np.int64)
    for p in range(partitions):
        n = int(counts[p])
        if n == 0:
            continue
        rate_per_ms = rate_per_s * weights[p] / 1000.0
        ts, offsets = _produces(columns, rng, p, n, rate_per_ms, start_ms, timeouts)
        if not has_followers[p]:
            continue
        leader = p % _BROKERS
        for index, replica in enumerate([(leader + 1) % _BROKERS,
                                         (leader + 2) % _BROKERS]):  # fmt: skip
            is_slow = index == 0 and p in slow
            _fetches(columns, rng, p, replica, ts, offsets, median_delay_ms, is_slow)
    return columns.table([f"orders-{p}" for p in range(partitions)])


def _check_trace_args(
    requests: int,
    partitions: int,
    rate_per_s: float,
    timeouts_ms: tuple[int, ...],
    slow_followers: int | None,
    rf1_every: int,
) -> int:
    """generate_trace's argument checks (TypeError or ValueError, naming the value).

    :return: ``slow_followers``, defaulted
    """
    _check_positive(requests, "requests")
    _check_positive(partitions, "partitions")
    if not (isinstance(rate_per_s, (int, float)) and rate_per_s > 0):
        raise ValueError(f"rate_per_s must be > 0, got {rate_per_s!r}")
    if not timeouts_ms or any(
        isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in timeouts_ms
    ):
        raise ValueError(f"timeouts_ms must be non-negative ints, got {timeouts_ms!r}")
    if slow_followers is None:
        slow_followers = max(1, partitions // 20)
    _check_positive(slow_followers, "slow_followers", minimum=0)
    _check_positive(rf1_every, "rf1_every", minimum=0)
    return slow_followers


def _plan(
    rng: Any, requests: int, partitions: int, slow_followers: int, rf1_every: int
) -> tuple[np.ndarray, np.ndarray, list[bool], set[int]]:
    """Per partition: its share of the rate, its request count, whether it has
    followers; and the partitions whose first follower is slow."""
    weights = rng.lognormal(0.0, 0.5, partitions)
    weights /= weights.sum()
    counts = rng.multinomial(requests, weights)
    has_followers = [
        not (rf1_every and p % rf1_every == rf1_every - 1) for p in range(partitions)
    ]
    candidates = [p for p in range(partitions) if has_followers[p] and counts[p]]
    if not (candidates and slow_followers):
        return weights, counts, has_followers, set()
    chosen = rng.choice(
        candidates, size=min(slow_followers, len(candidates)), replace=False
    )
    return weights, counts, has_followers, set(chosen.tolist())


class _Columns:
    """The trace's eight columns, gathered in pieces (one per partition and kind)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[np.ndarray, ...]] = []
        self.next_id = 0  # request ids are numbered across partitions

    def add(  # noqa: PLR0913 - one array per column
        self,
        ts: np.ndarray,
        partition: int,
        produce: bool,
        request_id: np.ndarray | int,
        required_offset: np.ndarray | int,
        timeout_ms: np.ndarray | int,
        replica: int,
        fetch_offset: np.ndarray | int,
    ) -> None:
        """Add ``len(ts)`` rows; a scalar fills its column."""
        m = len(ts)

        def full(v: np.ndarray | int, dtype: Any) -> np.ndarray:
            return v if isinstance(v, np.ndarray) else np.full(m, v, dtype=dtype)

        self.pieces.append((
            ts,
            np.full(m, partition, dtype=np.int32),
            np.full(m, 1 if produce else 0, dtype=np.int8),
            full(request_id, np.int64),
            full(required_offset, np.int64),
            full(timeout_ms, np.int64),
            np.full(m, replica, dtype=np.int32),
            full(fetch_offset, np.int64),
        ))  # fmt: skip

    def table(self, names: list[str]) -> pa.Table:
        """The rows, sorted by (ts_ms, partition, kind), as an EVENT_SCHEMA table."""
        ts, part, kind, rid, req, tmo, rep, fo = (
            np.concatenate(column) for column in zip(*self.pieces)
        )
        order = np.lexsort((kind, part, ts))
        is_produce = kind[order] == 1
        is_fetch = ~is_produce
        return pa.table(
            [
                pa.array(ts[order], pa.int64()),
                pc.take(pa.array(names, pa.string()), pa.array(part[order])),
                pc.if_else(pa.array(is_produce), "produce", "fetch"),
                pa.array(rid[order], pa.int64(), mask=is_fetch),
                pa.array(req[order], pa.int64(), mask=is_fetch),
                pa.array(tmo[order], pa.int64(), mask=is_fetch),
                pa.array(rep[order], pa.int32(), mask=is_produce),
                pa.array(fo[order], pa.int64(), mask=is_produce),
            ],
            schema=EVENT_SCHEMA,
        )


def _produces(  # noqa: PLR0913
    columns: _Columns,
    rng: Any,
    p: int,
    n: int,
    rate_per_ms: float,
    start_ms: int,
    timeouts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Partition ``p``'s ``n`` produce requests: Poisson arrivals, growing offsets.

    :return: their arrival times and required offsets
    """
    gaps = rng.exponential(1.0 / rate_per_ms, n)
    ts = start_ms + np.floor(np.cumsum(gaps)).astype(np.int64)
    offsets = np.cumsum(1 + rng.geometric(0.2, n) - 1).astype(np.int64)
    first_id = columns.next_id
    columns.next_id += n
    columns.add(ts, p, True, np.arange(first_id, first_id + n, dtype=np.int64),
                offsets, rng.choice(timeouts, n), -1, -1)  # fmt: skip
    return ts, offsets


def _fetches(  # noqa: PLR0913
    columns: _Columns,
    rng: Any,
    p: int,
    replica: int,
    ts: np.ndarray,
    offsets: np.ndarray,
    median_delay_ms: float,
    is_slow: bool,
) -> None:
    """One follower's fetches of partition ``p``: log-normal delays, in order."""
    median = median_delay_ms * (50.0 if is_slow else 1.0)
    delays = rng.lognormal(math.log(median), 1.2 if is_slow else 0.8, len(ts))
    arrive = ts + np.ceil(delays).astype(np.int64)
    if is_slow:
        arrive = _stall(arrive, ts[0], ts[-1], rng)
    # In-order replication: an offset arrives no earlier than the one before.
    arrive = np.maximum.accumulate(arrive)
    # Everything that reaches the follower at one ms comes in one fetch.
    last = np.append(arrive[1:] != arrive[:-1], True)
    columns.add(arrive[last], p, False, -1, -1, -1, replica, offsets[last])


def _stall(arrive: np.ndarray, first_ms: int, last_ms: int, rng: Any) -> np.ndarray:
    """Push arrivals that fall in stall episodes to the episode's end."""
    span = max(1, int(last_ms - first_ms))
    episodes = max(1, span // 90_000)
    starts = np.sort(rng.integers(first_ms, first_ms + span, episodes))
    lengths = rng.integers(8_000, 45_000, episodes)
    out = arrive.copy()
    for start, length in zip(starts.tolist(), lengths.tolist()):
        hit = (out >= start) & (out < start + length)
        out[hit] = start + length
    return out


def write_trace(
    path: str | os.PathLike[str],
    requests: int,
    partitions: int,
    *,
    seed: int = 0,
    malformed: int = 0,
    rows_per_file: int = 1_000_000,
) -> pa.Table:
    """Generate a trace and write it as a Parquet dataset directory at ``path``.

    :param malformed: also append this many malformed rows (for demos of ``rejected``)
    :param rows_per_file: rows per Parquet file
    :return: the table written
    :raises FileExistsError: if ``path`` exists and is not an empty directory
    """
    _check_positive(malformed, "malformed", minimum=0)
    table = generate_trace(requests, partitions, seed=seed)
    if malformed:
        table = pa.concat_tables([table, malformed_rows(table, malformed, seed=seed)])
    path = os.fspath(path)
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise FileExistsError(f"path {path!r} exists and is not an empty directory")
    os.makedirs(path, exist_ok=True)
    for i, start in enumerate(range(0, table.num_rows, rows_per_file)):
        pq.write_table(
            table.slice(start, rows_per_file),
            os.path.join(path, f"part-{i:05d}.parquet"),
        )
    return table


def malformed_rows(table: pa.Table, count: int, *, seed: int = 0) -> pa.Table:
    """``count`` malformed rows cycling through every rejection reason of the replay."""
    rng = np.random.default_rng(seed + 1)
    first = table.slice(0, 1).to_pylist()[0] if table.num_rows else {}
    ts0 = int(first.get("ts_ms") or 0)
    part = str(first.get("partition") or "orders-0")
    dup_id = None
    produces = table.filter(pc.equal(table["kind"], "produce"))
    if produces.num_rows:
        dup_id = int(produces["request_id"][0].as_py())
    base_id = (
        int(pc.max(table["request_id"]).as_py() or 0) + 1_000_000
        if table.num_rows
        else 0
    )
    templates: list[dict[str, Any]] = [
        {"kind": "commit"},
        {"kind": None},
        {"ts_ms": None},
        {"partition": None},
        {"request_id": None},
        {"required_offset": None},
        {"timeout_ms": None},
        {"timeout_ms": -5},
        {"kind": "fetch", "replica": None},
        {"kind": "fetch", "fetch_offset": None},
        {"request_id": dup_id},
    ]
    rows = []
    for i in range(count):
        row: dict[str, Any] = {
            "ts_ms": ts0 + int(rng.integers(0, 1000)),
            "partition": part,
            "kind": "produce",
            "request_id": base_id + i,
            "required_offset": 1,
            "timeout_ms": 1000,
            "replica": None,
            "fetch_offset": None,
        }
        row.update(templates[i % len(templates)])
        if row["kind"] == "fetch":
            row["request_id"] = row["required_offset"] = row["timeout_ms"] = None
            row.setdefault("replica", 1)
            if "replica" not in templates[i % len(templates)]:
                row["replica"] = 1
            if "fetch_offset" not in templates[i % len(templates)]:
                row["fetch_offset"] = 1
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)
