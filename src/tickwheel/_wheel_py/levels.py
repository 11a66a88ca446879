"""The twin's levels: TimingWheel, one level of the hierarchical wheel.

Mirrors ``_wheel_levels.pxi``, with the merge of ready and polled tasks
(_in_expiration_order) that the poll uses.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from .checks import (
    _LOCK,
    DEFAULT_TICK_MS,
    DEFAULT_WHEEL_SIZE,
    _check_positive,
    _check_time,
)
from .queue import DelayQueue
from .task import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList, _break_ring


class TimingWheel:
    """One level of Kafka's hierarchical timing wheel.

    ``wheel_size`` buckets of ``tick_ms`` each cover ``interval_ms``; a later
    deadline goes to the overflow wheel (created on first use), whose tick is
    this wheel's interval.  ``current_time_ms`` is always a multiple of
    ``tick_ms``.  Not thread-safe: a timer serialises access.

    Runtime complexity: add is O(levels); advance_clock is O(levels).

    >>> wheel = TimingWheel(tick_ms=10, wheel_size=5, start_ms=1000)
    >>> wheel.add(TimerTaskEntry(1005)), wheel.add(TimerTaskEntry(1010))
    (False, True)

    :param tick_ms: width of one bucket, >= 1
    :param wheel_size: number of buckets, >= 2
    :param start_ms: initial time, rounded down to a multiple of tick_ms
    :param counter: TaskCounter shared with overflow wheels (new if None)
    :param queue: DelayQueue shared with overflow wheels (new if None)
    :raises ValueError: if tick_ms < 1 or wheel_size < 2
    """

    __slots__ = (
        "_tick_ms",
        "_wheel_size",
        "_interval_ms",
        "_buckets",
        "_current_time_ms",
        "_overflow",
        "_counter",
        "_queue",
    )

    def __init__(
        self,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        start_ms: int = 0,
        counter: TaskCounter | None = None,
        queue: DelayQueue | None = None,
    ) -> None:
        self._tick_ms = _check_positive(tick_ms, "tick_ms", 1)
        self._wheel_size = _check_positive(wheel_size, "wheel_size", 2)
        start_ms = _check_time(start_ms, "start_ms")
        if self._tick_ms * self._wheel_size > 2**62:
            raise OverflowError("tick_ms * wheel_size is too large")
        self._interval_ms = self._tick_ms * self._wheel_size
        self._counter = counter if counter is not None else TaskCounter()
        self._queue = queue if queue is not None else DelayQueue()
        self._buckets = [TimerTaskList(self._counter) for _ in range(self._wheel_size)]
        self._current_time_ms = start_ms - start_ms % self._tick_ms
        self._overflow: TimingWheel | None = None

    tick_ms = property(lambda self: self._tick_ms, doc="Width of one bucket.")
    wheel_size = property(lambda self: self._wheel_size, doc="Number of buckets.")
    interval_ms = property(lambda self: self._interval_ms, doc="tick_ms * wheel_size.")
    current_time_ms = property(
        lambda self: self._current_time_ms,
        doc="The wheel's clock, a multiple of tick_ms.",
    )
    overflow_wheel = property(
        lambda self: self._overflow, doc="The next level up, or None until needed."
    )
    counter = property(lambda self: self._counter, doc="The shared TaskCounter.")
    queue = property(lambda self: self._queue, doc="The shared DelayQueue of buckets.")

    def __del__(self, _break: Callable[[TimerTaskList], None] = _break_ring) -> None:
        # As the core's __dealloc__: nodes reference their bucket, so without
        # this the rings would keep every bucket (and pending task) alive
        # until the cyclic GC ran.  (``_break``: see TimerTaskList.__del__.)
        for bucket in getattr(self, "_buckets", ()):  # () if __init__ raised
            _break(bucket)

    def bucket(self, index: int) -> TimerTaskList:
        """The bucket at ``index`` (0 <= index < wheel_size)."""
        return self._buckets[index]

    def add(self, entry: TimerTaskEntry) -> bool:
        """Link ``entry`` into the bucket for its expiration.

        :return: False if the entry is already due (expiration before
            current_time_ms + tick_ms): the caller must run it instead.
        """
        if not isinstance(entry, TimerTaskEntry):
            raise TypeError(f"entry must be a TimerTaskEntry, got {entry!r}")
        with _LOCK:
            if entry._next is not None:
                raise ValueError(f"{entry!r} is already linked in a bucket")
            return self._add(entry)

    def _add(self, entry: TimerTaskEntry) -> bool:
        wheel = self
        expiration = entry._expiration_ms
        while True:
            tick = wheel._tick_ms
            current = wheel._current_time_ms
            if expiration < current + tick:
                return False
            if expiration < current + wheel._interval_ms:
                virtual_id = expiration // tick
                bucket = wheel._buckets[virtual_id % wheel._wheel_size]
                bucket._link(entry)
                # The bucket is queued once per time slot: only when its
                # expiration changes does it need a (new) place in the queue.
                # Set unchecked, as the core does: a deadline may lie past
                # the clock range (up to MAX_DELAY_MS beyond it), and raising
                # here would leave the entry linked in an unqueued bucket.
                slot = virtual_id * tick
                if bucket._expiration_ms != slot:
                    bucket._expiration_ms = slot
                    wheel._queue.offer(bucket)
                return True
            if wheel._overflow is None:
                wheel._overflow = TimingWheel(
                    wheel._interval_ms,
                    wheel._wheel_size,
                    current,
                    wheel._counter,
                    wheel._queue,
                )
            wheel = wheel._overflow

    def advance_clock(self, time_ms: int) -> None:
        """Move current_time_ms forward to ``time_ms`` rounded down to the tick."""
        time_ms = _check_time(time_ms, "time_ms")
        with _LOCK:
            self._advance(time_ms)

    def _advance(self, time_ms: int) -> None:
        wheel: TimingWheel | None = self
        while wheel is not None:
            if time_ms < wheel._current_time_ms + wheel._tick_ms:
                return
            wheel._current_time_ms = time_ms - time_ms % wheel._tick_ms
            time_ms = wheel._current_time_ms
            wheel = wheel._overflow

    def levels(self) -> int:
        """How many wheels (this one plus overflow wheels) exist."""
        n = 0
        wheel: TimingWheel | None = self
        while wheel is not None:
            n += 1
            wheel = wheel._overflow
        return n

    def _clear(self) -> None:
        wheel: TimingWheel | None = self
        while wheel is not None:
            for bucket in wheel._buckets:
                bucket._clear()
            wheel = wheel._overflow

    def _check(self) -> None:
        """Raise AssertionError unless every level's buckets hold what they should."""
        linked = 0
        wheel: TimingWheel | None = self
        queued = {id(b) for _, _, b in self._queue._heap}
        while wheel is not None:
            tick = wheel._tick_ms
            if wheel._current_time_ms % tick:
                raise AssertionError("current_time_ms not a multiple of tick_ms")
            if wheel._overflow is not None:
                over = wheel._overflow
                if over._tick_ms != wheel._interval_ms:
                    raise AssertionError("overflow tick must equal the child interval")
                if (
                    over._counter is not wheel._counter
                    or over._queue is not wheel._queue
                ):
                    raise AssertionError("overflow wheel must share counter and queue")
            for index, bucket in enumerate(wheel._buckets):
                bucket._check()
                if bucket._counter is not wheel._counter:
                    raise AssertionError("bucket counter differs from the wheel's")
                linked += bucket._size
                if not bucket._size:
                    continue
                expiration = bucket._expiration_ms
                if expiration is None or id(bucket) not in queued:
                    raise AssertionError(f"non-empty bucket {index} is not queued")
                for entry in bucket.entries():
                    e = entry._expiration_ms
                    if not expiration <= e < expiration + tick:
                        raise AssertionError(
                            f"{entry!r} in slot [{expiration}, {expiration + tick})"
                        )
                    if (e // tick) % wheel._wheel_size != index:
                        raise AssertionError(f"{entry!r} in the wrong bucket")
            wheel = wheel._overflow
        self._queue._check()

    def _linked(self) -> int:
        total = 0
        wheel: TimingWheel | None = self
        while wheel is not None:
            total += sum(b._size for b in wheel._buckets)
            wheel = wheel._overflow
        return total

    def __repr__(self) -> str:
        return (
            f"<TimingWheel tick_ms={self._tick_ms} wheel_size={self._wheel_size} "
            f"current_time_ms={self._current_time_ms} levels={self.levels()}>"
        )


_EXPIRATION = operator.attrgetter("expiration_ms")


def _in_expiration_order(tasks: list[TimerTask], n_ready: int) -> list[TimerTask]:
    """The ready tasks (the first ``n_ready``) merged into the polled ones.

    By expiration; on a tie the polled task goes first, because it was added
    earlier: it was not yet due when added, the ready one already was.
    """
    merged = tasks[n_ready:] + tasks[:n_ready]
    merged.sort(key=_EXPIRATION)
    return merged
