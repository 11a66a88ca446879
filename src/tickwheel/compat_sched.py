"""A ``sched.scheduler`` whose events live in a timing wheel: O(1) cancel.

Why: the standard library keeps events in a heap list and cancels with
``list.remove`` + ``heapify``, so cancelling is O(n) and cancelling 20,000
events one by one takes seconds.  :class:`scheduler` has the same API and the
same ordering rules but files events in tickwheel's hierarchical wheel, keyed
by their time mapped onto wheel ticks, so ``enter``/``enterabs`` cost
O(levels) and ``cancel`` O(1).

How times of any unit map onto the wheel: an event's tick is
``ceil((time - origin) * ticks_per_unit)``, where ``origin`` is the
``timefunc()`` reading when the scheduler was created and ``ticks_per_unit``
defaults to 1000 (millisecond ticks for a clock in seconds).  The mapping is
monotonic, so an earlier tick always means an earlier time.  The wheel is
driven on this *virtual* clock, never by real time: to find the next event
the scheduler pops the earliest due bucket (moving coarse buckets down the
levels) until it holds the events of the earliest tick, then orders just those
exactly by ``(time, priority, sequence)``, as ``sched`` does.  Any clock
works: ``time.monotonic`` (the default), ``time.time``, or an integer fake
clock in tests.  The tick size only affects speed, never the order.

>>> import sched
>>> from tickwheel.compat_sched import scheduler
>>> class FakeClock:
...     now = 0
...     def time(self): return self.now
...     def sleep(self, delay): self.now += delay
>>> clock = FakeClock()
>>> s = scheduler(clock.time, clock.sleep)
>>> order = []
>>> e1 = s.enter(2, 1, order.append, ("b",))
>>> e2 = s.enter(1, 1, order.append, ("a",))
>>> e3 = s.enter(2, 0, order.append, ("first at 2",))
>>> s.cancel(e1)
>>> isinstance(e2, sched.Event), [e.argument for e in s.queue]
(True, [('a',), ('first at 2',)])
>>> s.run(), order, clock.now
(None, ['a', 'first at 2'], 2)

Documented differences from ``sched.scheduler``:

* times must be real numbers (``int``, ``float``, ``Fraction``,
  ``Decimal``...): other time types (``datetime``) raise TypeError at
  ``enterabs``/``enter``, where ``sched`` would accept anything comparable;
  NaN times raise ValueError;
* ``cancel()`` finds the event by its ``sequence`` number, then checks it is
  equal to the one given (sched compares with ``==`` over the whole queue).
"""

from __future__ import annotations

import heapq
import itertools
import math
import threading
import time as _time
from collections.abc import Callable
from sched import Event
from typing import Any

from ._impl import MAX_DELAY_MS, TimerCore, TimerTask

__all__ = ["Event", "scheduler"]

_sentinel = object()
_new_event = tuple.__new__


def _make_event(
    time: Any, priority: Any, seq: int, action: Any, argument: Any, kwargs: Any
) -> Event:
    return _new_event(Event, (time, priority, seq, action, argument, kwargs))


_LIMIT_TICK = MAX_DELAY_MS - 1
_heappush = heapq.heappush
_heappop = heapq.heappop
_ceil = math.ceil


class _EventTask(TimerTask):
    """The wheel node of one event (run() is never called: run() pops events)."""

    __slots__ = ("event",)
    event: Event


class scheduler:
    """``sched.scheduler`` on a timing wheel: same API, O(1) ``cancel``.

    Runtime complexity: enter/enterabs O(levels); cancel O(1); empty O(1);
    run pops each event in amortised O(levels + log k) for k events sharing
    its tick; ``queue`` is O(n log n), as in sched.

    >>> s = scheduler(lambda: 0, lambda delay: None)
    >>> e = s.enterabs(5, 0, print, ("five",))
    >>> s.run(blocking=False)   # next event is 5 time units away
    5
    >>> s.cancel(e); s.empty()
    True

    :param timefunc: a clock returning numbers (default time.monotonic)
    :param delayfunc: called with the time to wait (default time.sleep)
    :param ticks_per_unit: wheel ticks per unit of ``timefunc`` (keyword-only;
        default 1000: millisecond ticks for a clock in seconds)
    :raises TypeError: if ``timefunc`` or ``delayfunc`` is not callable, or
        ``timefunc()`` does not return a number
    :raises ValueError: if ``ticks_per_unit`` is not a positive finite number
    """

    def __init__(
        self,
        timefunc: Callable[[], Any] = _time.monotonic,
        delayfunc: Callable[[Any], object] = _time.sleep,
        *,
        ticks_per_unit: float = 1000,
    ) -> None:
        if not callable(timefunc):
            raise TypeError(f"timefunc must be callable, got {timefunc!r}")
        if not callable(delayfunc):
            raise TypeError(f"delayfunc must be callable, got {delayfunc!r}")
        if (
            isinstance(ticks_per_unit, bool)
            or not isinstance(ticks_per_unit, (int, float))
            or not 0 < ticks_per_unit < math.inf
        ):
            raise ValueError(
                "ticks_per_unit must be a positive finite number, "
                f"got {ticks_per_unit!r}"
            )
        self.timefunc = timefunc
        self.delayfunc = delayfunc
        # An integral factor stays an int, so Decimal and Fraction times work.
        self._ticks_per_unit: float = (
            int(ticks_per_unit)
            if ticks_per_unit == int(ticks_per_unit)
            else ticks_per_unit
        )
        origin = timefunc()
        try:
            self._tick_of(origin, origin)
        except (TypeError, ValueError):
            raise TypeError(
                f"timefunc() must return a real number, got {origin!r}"
            ) from None
        self._origin = origin
        self._lock = threading.RLock()
        self._sequence = itertools.count()
        # A manual core whose "now" stays 0: an event of tick t is added with
        # delay t, so its expiration is exactly t.  _current is the last tick
        # the wheel was polled at; events at or before it bypass the wheel.
        self._core = TimerCore(1, 20, 0, None, True)
        self._current = 0
        # Live events by sequence number (the cancel index) ...
        self._tasks: dict[int, _EventTask] = {}
        # ... and the exact-order heap of those whose tick is <= _current, as
        # (time, priority, sequence) keys; cancelled ones are skipped lazily.
        self._front: list[tuple[Any, Any, int]] = []

    def _tick_of(self, time: Any, origin: Any) -> int:
        """Map a time onto a wheel tick (monotonic, clamped to the wheel's range)."""
        x = (time - origin) * self._ticks_per_unit
        if x != x:
            raise ValueError(f"time must not be NaN, got {time!r}")
        if x >= _LIMIT_TICK:
            return _LIMIT_TICK
        if x <= -_LIMIT_TICK:
            return -_LIMIT_TICK
        return int(math.ceil(x))

    def enterabs(
        self,
        time: Any,
        priority: Any,
        action: Callable[..., object],
        argument: tuple[Any, ...] = (),
        kwargs: Any = _sentinel,
    ) -> Event:
        """Schedule ``action(*argument, **kwargs)`` at absolute ``time``.

        Events at the same time run by ``priority`` (lowest first), then in
        the order they were entered.

        Runtime complexity: O(levels).

        :return: the Event, which cancel() accepts
        :raises TypeError: if ``time`` is not a real number
        :raises ValueError: if ``time`` is NaN
        """
        if kwargs is _sentinel:
            kwargs = {}
        x = None
        if type(time) is float or type(time) is int:  # fast path, no method call
            x = (time - self._origin) * self._ticks_per_unit
        if x is not None and -_LIMIT_TICK < x < _LIMIT_TICK:
            tick = _ceil(x)
        else:
            try:
                tick = self._tick_of(time, self._origin)
            except TypeError:
                raise TypeError(f"time must be a real number, got {time!r}") from None
        with self._lock:
            seq = next(self._sequence)
            event = _make_event(time, priority, seq, action, argument, kwargs)
            task = _EventTask(tick)
            task.event = event
            self._tasks[seq] = task
            if tick > self._current:
                self._core.add(task)
            else:
                _heappush(self._front, (time, priority, seq))
        return event

    def enter(
        self,
        delay: Any,
        priority: Any,
        action: Callable[..., object],
        argument: tuple[Any, ...] = (),
        kwargs: Any = _sentinel,
    ) -> Event:
        """Schedule an event ``delay`` time units from now (see :meth:`enterabs`)."""
        return self.enterabs(
            self.timefunc() + delay, priority, action, argument, kwargs
        )

    def cancel(self, event: Event) -> None:
        """Remove ``event`` from the queue.

        Runtime complexity: O(1) (sched's is O(n)).

        :raises ValueError: if the event is not in the queue
        """
        with self._lock:
            try:
                seq = event.sequence  # unique per scheduler
                task = self._tasks[seq]
            except (AttributeError, KeyError, TypeError):
                raise ValueError(f"event is not in the queue: {event!r}") from None
            if task.event is not event and task.event != event:
                raise ValueError(f"event is not in the queue: {event!r}")
            del self._tasks[seq]
            task.cancel()

    def empty(self) -> bool:
        """True if no event is scheduled."""
        with self._lock:
            return not self._tasks

    def _peek(self) -> Event | None:
        """The next event in (time, priority, sequence) order, or None."""
        front = self._front
        tasks = self._tasks
        core = self._core
        while True:
            while front:
                task = tasks.get(front[0][2])
                if task is not None:
                    return task.event
                _heappop(front)  # cancelled
            head = core.next_expiration_ms
            if head is None:
                return None
            # Nothing pending is due before `head`, so the virtual clock may
            # jump there; step=True stops after the first tick that expires.
            for expired in core._take_due(head, True):
                event = expired.event  # type: ignore[attr-defined]
                _heappush(front, (event.time, event.priority, event.sequence))
            if head > self._current:
                self._current = head

    def run(self, blocking: bool = True) -> Any | None:
        """Run events as they come due, like ``sched.scheduler.run``.

        Waits with ``delayfunc`` and calls ``delayfunc(0)`` after each event.
        An exception raised by an action propagates; the event is already
        removed and calling run() again goes on with the rest.

        :param blocking: if False, run what is due and return
        :return: None when the queue is empty, else (non-blocking) the time
            until the next event, ``event.time - timefunc()``
        """
        lock = self._lock
        delayfunc = self.delayfunc
        timefunc = self.timefunc
        while True:
            with lock:
                event = self._peek()
                if event is None:
                    break
                now = timefunc()
                if event.time > now:
                    delay = True
                else:
                    delay = False
                    _heappop(self._front)
                    task = self._tasks.pop(event.sequence)
                    task.cancel()  # "expired" -> cancelled: releases the node
            if delay:
                if not blocking:
                    return event.time - now
                delayfunc(event.time - now)
            else:
                event.action(*event.argument, **event.kwargs)
                delayfunc(0)  # let other threads run, as sched does
        return None

    @property
    def queue(self) -> list[Event]:
        """The pending events in the order they will run (a new list)."""
        with self._lock:
            return sorted(task.event for task in self._tasks.values())

    def _check(self) -> None:
        """Raise AssertionError unless the wheel, the front and the index agree."""
        with self._lock:
            self._core._check()
            front = {key[2] for key in self._front}
            for seq, task in self._tasks.items():
                if task.event.sequence != seq:
                    raise AssertionError(f"index {seq} holds {task.event!r}")
                if seq not in front and not task.pending:
                    raise AssertionError(
                        f"{task.event!r} is neither pending nor in front"
                    )
            if len(self._core) != sum(1 for t in self._tasks.values() if t.pending):
                raise AssertionError("wheel count differs from pending events")
