"""Kafka's two classic delayed operations on a small replication model.

Why
---
The purgatory is easiest to understand, and to test, on the requests Kafka
built it for.  This module keeps just enough broker state to decide them:

* a :class:`Partition` is the leader's view of one topic-partition: its own
  log end offset (LEO), each follower's LEO as reported by its fetches, the
  in-sync replica set (ISR) and the bytes of each appended batch;
* its **high watermark** (HW) is the smallest LEO among the leader and the
  in-sync followers: every record below it is on every in-sync replica;
* a :class:`DelayedProduce` (``acks=all``) waits until the HW reaches the
  offset its append ended at, i.e. until every in-sync follower's LEO does,
  and otherwise times out with ``REQUEST_TIMED_OUT``;
* a :class:`DelayedFetch` (a consumer's long poll) waits until at least
  ``min_bytes`` below the HW are available past its fetch offsets, or
  ``max_wait_ms`` passes, and then returns what there is.

Both record their ``outcome`` (``"completed"`` or ``"expired"``) and
``done_ms`` from the clock they are given (a :class:`~tickwheel.MockTimer`'s
``now_ms`` replays event time exactly), and watch their partitions' names.
Whoever changes a partition calls ``purgatory.check_and_complete(name)``.

Worked example: two followers; a produce ending at offset 3 completes when
the slower in-sync follower reaches 3, or when it leaves the ISR.

>>> from tickwheel import MockTimer
>>> from tickwheel.purgatory import DelayedOperationPurgatory
>>> timer = MockTimer()
>>> clock = lambda: timer.now_ms
>>> p0 = Partition("t-0", followers=[1, 2])
>>> produce = DelayedProduce(p0, p0.append(records=3, nbytes=300), 100, clock=clock)
>>> purgatory = DelayedOperationPurgatory("Produce", timer)
>>> purgatory.try_complete_else_watch(produce, produce.keys)
False
>>> timer.advance_clock(4); p0.record_fetch(1, 3); p0.high_watermark
False
0
>>> purgatory.check_and_complete("t-0")
0
>>> timer.advance_clock(3); p0.shrink_isr(2); p0.high_watermark
False
3
>>> purgatory.check_and_complete("t-0"), produce.outcome, produce.done_ms
(1, 'completed', 7)
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

# Partition and DelayedProduce are built on the compiled _kafka module or its
# twin _kafka_py (chosen once by _impl): the fields the purgatory's hot loop
# reads, and the produce's two hooks.
from ._impl import (
    COMPLETED,
    EXPIRED,
    REQUEST_TIMED_OUT,
    DelayedOperation,
    _PartitionCore,
    _ProduceCore,
)

__all__ = [
    "COMPLETED",
    "EXPIRED",
    "REQUEST_TIMED_OUT",
    "DelayedFetch",
    "DelayedProduce",
    "Partition",
]

Clock = Callable[[], int]


def _check_int(value: object, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def _check_clock(clock: object) -> Clock:
    if not callable(clock):
        raise TypeError(f"clock must be a callable returning ms, got {clock!r}")
    return clock


_NO_ISR = float("inf")


class Partition(_PartitionCore):
    """The leader's replication state of one topic-partition.

    The partition keeps the smallest LEO of its in-sync followers up to
    date as fetches and ISR changes arrive (as Kafka's leader keeps its high
    watermark), so asking whether an offset is acknowledged costs one
    comparison however often the purgatory asks.  Change the state through
    the methods; ``leos`` and ``isr`` are read-only views.

    Runtime complexity: high_watermark and acked O(1); append O(1);
    record_fetch, shrink_isr, expand_isr and add_follower O(ISR size);
    bytes_between O(log batches).

    >>> p = Partition("t-0", followers=[1, 2])
    >>> p.append(records=2, nbytes=100), p.high_watermark
    (2, 0)
    >>> p.record_fetch(1, 2); p.record_fetch(2, 1); p.high_watermark
    1
    >>> p.shrink_isr(2); p.high_watermark, sorted(p.isr)
    (2, [1])

    :param name: the watch key (e.g. ``"topic-0"``)
    :param followers: follower replica ids; all start in the ISR with LEO 0
    :raises TypeError: if ``name`` is unhashable or a follower id is not an int
    """

    __slots__ = (
        "name",
        "leader_leo",
        "leos",
        "_leos",
        "_isr",
        "_batch_ends",
        "_batch_cum_bytes",
    )

    #: follower -> log end offset (read-only view; see record_fetch)
    leos: Mapping[int, int]

    def __init__(self, name: Hashable, followers: Iterable[int] = ()) -> None:
        try:
            hash(name)
        except TypeError:
            raise TypeError(f"name must be hashable, got {name!r}") from None
        self.name = name
        self.leader_leo = 0
        self._leos: dict[int, int] = {}
        self.leos = MappingProxyType(self._leos)
        self._isr: set[int] = set()
        self._acked_to = _NO_ISR
        self._batch_ends: list[int] = []
        self._batch_cum_bytes: list[int] = []
        for replica in followers:
            self.add_follower(replica)

    @property
    def isr(self) -> frozenset[int]:
        """The in-sync followers (a snapshot; see shrink_isr and expand_isr)."""
        return frozenset(self._isr)

    def _update_acked(self) -> None:
        # The smallest LEO in the ISR (infinity for an empty ISR: every
        # offset is then acknowledged by all in-sync followers, i.e. none).
        leos = self._leos
        isr = self._isr
        self._acked_to = min([leos[r] for r in isr]) if isr else _NO_ISR

    def add_follower(self, replica: int, leo: int = 0, in_sync: bool = True) -> None:
        """Add a follower with log end offset ``leo`` (in the ISR unless in_sync=False).

        :raises ValueError: if it is already a follower or ``leo`` is negative
        """
        _check_int(replica, "replica", minimum=-(2**63))
        _check_int(leo, "leo")
        if replica in self._leos:
            raise ValueError(
                f"replica {replica!r} is already a follower of {self.name!r}"
            )
        self._leos[replica] = leo
        if in_sync:
            self._isr.add(replica)
            self._update_acked()

    def append(self, records: int = 1, nbytes: int = 0) -> int:
        """Append a batch on the leader; return the new leader LEO (required offset).

        :raises ValueError: if ``records`` < 1 or ``nbytes`` < 0
        """
        _check_int(records, "records", minimum=1)
        _check_int(nbytes, "nbytes")
        self.leader_leo += records
        total = self._batch_cum_bytes[-1] if self._batch_cum_bytes else 0
        self._batch_ends.append(self.leader_leo)
        self._batch_cum_bytes.append(total + nbytes)
        return self.leader_leo

    def record_fetch(self, replica: int, leo: int) -> None:
        """A follower fetched: its log end offset is now ``leo``.

        Call ``purgatory.check_and_complete(partition.name)`` afterwards.

        :raises ValueError: if ``replica`` is not a follower or ``leo`` is negative
        """
        _check_int(leo, "leo")
        if replica not in self._leos:
            raise ValueError(
                f"replica {replica!r} is not a follower of {self.name!r} "
                "(add_follower first)"
            )
        self._leos[replica] = leo
        if replica in self._isr:
            self._update_acked()

    def shrink_isr(self, replica: int) -> None:
        """Remove a lagging follower from the ISR (the HW may rise: check the key)."""
        if replica not in self._leos:
            raise ValueError(f"replica {replica!r} is not a follower of {self.name!r}")
        self._isr.discard(replica)
        self._update_acked()

    def expand_isr(self, replica: int) -> None:
        """Put a follower back in the ISR (it should have caught up)."""
        if replica not in self._leos:
            raise ValueError(f"replica {replica!r} is not a follower of {self.name!r}")
        self._isr.add(replica)
        self._update_acked()

    def caught_up(self, replica: int) -> bool:
        """True iff the follower's LEO has reached the leader's."""
        return self._leos[replica] >= self.leader_leo

    @property
    def high_watermark(self) -> int:
        """min(leader LEO, LEO of every in-sync follower)."""
        acked = self._acked_to
        leader = self.leader_leo
        return leader if leader <= acked else int(acked)

    def acked(self, offset: int) -> bool:
        """True iff every in-sync follower's LEO is >= ``offset`` (acks=all)."""
        return self._acked_to >= offset

    def bytes_between(self, start: int, end: int) -> int:
        """Bytes of the batches that lie wholly in offsets [start, end)."""
        ends = self._batch_ends
        cum = self._batch_cum_bytes
        # Batches ending at or before `start` are behind the reader; a batch
        # that ends after `end` is not readable yet.
        lo = bisect_right(ends, start)
        hi = bisect_right(ends, end)
        if hi <= lo:
            return 0
        return cum[hi - 1] - (cum[lo - 1] if lo else 0)

    def __repr__(self) -> str:
        return (
            f"<Partition {self.name!r} leo={self.leader_leo} hw={self.high_watermark} "
            f"isr={sorted(self._isr)}>"
        )


class _Outcome:
    """Outcome bookkeeping shared by the two operations."""

    __slots__ = ()

    arrival_ms: int
    timeout_ms: int
    done_ms: int | None
    outcome: str | None

    @property
    def deadline_ms(self) -> int:
        """arrival_ms + timeout."""
        return self.arrival_ms + self.timeout_ms

    @property
    def latency_ms(self) -> int | None:
        """done_ms - arrival_ms once done, else None."""
        if self.done_ms is None:
            return None
        return self.done_ms - self.arrival_ms


class DelayedProduce(_Outcome, _ProduceCore):
    """An ``acks=all`` produce: done once every in-sync follower has the offset.

    Watch it under :attr:`keys` (the partition name).  On completion it sets
    ``outcome`` (``"completed"``/``"expired"``), ``error`` (None or
    ``"REQUEST_TIMED_OUT"``) and ``done_ms``, then calls ``callback(self)``.

    :param partition: the partition appended to
    :param required_offset: the leader's LEO after the append
    :param timeout_ms: the request timeout
    :param clock: returns the current time in ms (e.g. ``lambda: timer.now_ms``)
    :param callback: called with the operation once it is done
    :param request_id: an id to carry along (e.g. for the replay's outcomes)
    :param lock: shared lock, see DelayedOperation
    """

    __slots__ = ()

    def __init__(
        self,
        partition: Partition,
        required_offset: int,
        timeout_ms: int,
        *,
        clock: Clock,
        callback: Callable[[DelayedProduce], Any] | None = None,
        request_id: Any = None,
        lock: Any = None,
    ) -> None:
        if not isinstance(partition, Partition):
            raise TypeError(f"partition must be a Partition, got {partition!r}")
        _check_int(required_offset, "required_offset")
        _check_int(timeout_ms, "timeout_ms")
        self._clock = _check_clock(clock)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        super().__init__(timeout_ms, lock)
        self.partition = partition
        self.required_offset = required_offset
        self.timeout_ms = timeout_ms
        self.arrival_ms = self._clock()
        self.done_ms = None
        self.outcome = None
        self.error = None
        self.request_id = request_id
        self._callback = callback

    @property
    def keys(self) -> list[Hashable]:
        """The watch keys: the partition's name."""
        return [self.partition.name]


class DelayedFetch(_Outcome, DelayedOperation):
    """A consumer fetch: done when ``min_bytes`` below the HW are there, or at max_wait.

    ``fetch_offsets`` maps each :class:`Partition` to the offset the consumer
    reads from; available bytes are those of whole batches between that offset
    and the partition's high watermark, summed over partitions.  At completion
    ``bytes_returned`` holds what was available then (possibly less than
    min_bytes if it expired: a long poll returns what there is, not an error).

    :param fetch_offsets: partition -> fetch offset (at least one)
    :param min_bytes: bytes to wait for (0 or 1: any data / none needed)
    :param max_wait_ms: the longest the fetch waits
    :param clock: returns the current time in ms
    :param callback: called with the operation once it is done
    :param lock: shared lock, see DelayedOperation
    """

    __slots__ = (
        "fetch_offsets",
        "min_bytes",
        "timeout_ms",
        "arrival_ms",
        "done_ms",
        "outcome",
        "bytes_returned",
        "_clock",
        "_callback",
    )

    def __init__(
        self,
        fetch_offsets: Mapping[Partition, int],
        min_bytes: int,
        max_wait_ms: int,
        *,
        clock: Clock,
        callback: Callable[[DelayedFetch], Any] | None = None,
        lock: Any = None,
    ) -> None:
        if not isinstance(fetch_offsets, Mapping) or not fetch_offsets:
            raise TypeError(
                f"fetch_offsets must be a non-empty mapping Partition -> offset, "
                f"got {fetch_offsets!r}"
            )
        for partition, offset in fetch_offsets.items():
            if not isinstance(partition, Partition):
                raise TypeError(
                    f"fetch_offsets keys must be Partitions, got {partition!r}"
                )
            _check_int(offset, f"fetch offset for {partition.name!r}")
        _check_int(min_bytes, "min_bytes")
        _check_int(max_wait_ms, "max_wait_ms")
        self._clock = _check_clock(clock)
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        super().__init__(max_wait_ms, lock)
        self.fetch_offsets = dict(fetch_offsets)
        self.min_bytes = min_bytes
        self.timeout_ms = max_wait_ms
        self.arrival_ms = self._clock()
        self.done_ms = None
        self.outcome = None
        self.bytes_returned: int | None = None
        self._callback = callback

    @property
    def keys(self) -> list[Hashable]:
        """The watch keys: the names of the fetched partitions."""
        return [p.name for p in self.fetch_offsets]

    def available_bytes(self) -> int:
        """Bytes readable now: whole batches between each fetch offset and its HW."""
        return sum(
            p.bytes_between(offset, p.high_watermark)
            for p, offset in self.fetch_offsets.items()
        )

    def try_complete(self) -> bool:
        """Complete iff available_bytes() >= min_bytes."""
        if self.available_bytes() >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        """Record the bytes returned, outcome and completion time; call the callback."""
        self.done_ms = self._clock()
        self.bytes_returned = self.available_bytes()
        self.outcome = EXPIRED if self.expired else COMPLETED
        if self._callback is not None:
            self._callback(self)
