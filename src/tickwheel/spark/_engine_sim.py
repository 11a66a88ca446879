"""The replay's simulation: one partition's purgatories on manual clocks.

:class:`_PartitionReplay` holds a partition's replicas and ISR, one
:class:`_Setting` (MockTimer, purgatory, recorded outcomes) per timeout
setting, and the followers' lag timers; the event loop (``_loop``, compiled
or its reference) feeds it the events.  The rules it follows are in
:mod:`tickwheel.spark.engine`'s docstring.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import numpy as np

from tickwheel import MockTimer, _impl
from tickwheel.kafka import DelayedProduce, Partition
from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

#: The event loop: ``_replay.pyx`` compiled, or its reference ``_replay_py.py``.
_loop = _impl.select("spark._replay")


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
