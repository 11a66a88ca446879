"""The twin's core: TimerCore, a timer's state and its Python API.

Mirrors ``_wheel_core.pxi``: each method checks its arguments, takes the
twin's lock and hands the work to the unit that does it: placement
(:mod:`.place`), expiry (:mod:`.expiry`), precascade (:mod:`.precascade`),
the asyncio layer's checked paths (:mod:`.loop`).
"""

from __future__ import annotations

import contextvars
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .checks import (
    _EXPIRED,
    _LOCK,
    _NS_PER_MS,
    DEFAULT_TICK_MS,
    DEFAULT_WHEEL_SIZE,
    PRECASCADE_CHUNK,
    _check_positive,
    _check_reach,
    _check_time,
    _delay_to_ns,
)
from .expiry import _poll, _run_tasks
from .levels import TimingWheel
from .loop import _loop_slow
from .place import _add
from .precascade import _next_precascade, _precascade
from .queue import DelayQueue
from .task import TaskCounter, TimerTask, TimerTaskList

_T = TypeVar("_T", bound="TimerTask")
_monotonic_ns = time.monotonic_ns


class TimerCore:
    """The fast part of a timer: wheel, bucket queue, clock, add/cancel/expire.

    SystemTimer and MockTimer subclass it.  Deadlines are computed from the
    clock in nanoseconds and rounded *up* to the tick, so a task is never
    considered due before its deadline (Kafka truncates "now" to the
    millisecond and can fire up to a tick early).

    :param tick_ms: wheel resolution in milliseconds, >= 1
    :param wheel_size: buckets per level, >= 2
    :param start_ms: wheel start (default: now)
    :param clock: a callable returning nanoseconds (default time.monotonic_ns)
    :param manual: drive the clock by hand via now_ns (MockTimer)
    """

    def __init__(
        self,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        start_ms: int | None = None,
        clock: Callable[[], int] | None = None,
        manual: bool = False,
    ) -> None:
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be callable, got {clock!r}")
        self._clock = clock if clock is not None else _monotonic_ns
        self._manual = bool(manual)
        tick_ms = _check_positive(tick_ms, "tick_ms", 1)
        wheel_size = _check_positive(wheel_size, "wheel_size", 2)
        _check_reach(tick_ms, wheel_size)
        if start_ms is None:
            start_ms = 0 if manual else self._clock() // _NS_PER_MS
        start_ms = _check_time(start_ms, "start_ms")
        self._manual_now_ns = start_ms * _NS_PER_MS
        self._counter = TaskCounter()
        self._counter._owner = weakref.ref(self)
        self._queue = DelayQueue()
        self._wheel = TimingWheel(
            tick_ms, wheel_size, start_ms, self._counter, self._queue
        )
        self._tick_ms = tick_ms
        # Expired tasks point at this (never linked) bucket so that running or
        # cancelling them can still find the counter.
        self._expired = TimerTaskList(self._counter)
        self._ready: list[TimerTask] = []
        self._closed = False
        # precascade(): the overflow bucket being moved down early, its slot,
        # entries left in the current pass, and the lower level's horizon when
        # the pass began (-1: no pass yet).
        self._pc_bucket: TimerTaskList | None = None
        self._pc_expiration = 0
        self._pc_left = 0
        self._pc_horizon = -1

    # -- clock -------------------------------------------------------------
    @property
    def now_ns(self) -> int:
        """The timer's clock in nanoseconds."""
        if self._manual:
            return self._manual_now_ns
        return self._clock()

    @now_ns.setter
    def now_ns(self, value: int) -> None:
        if not self._manual:
            raise AttributeError("now_ns is read-only on a real-time timer")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"now_ns must be an int, got {value!r}")
        if not -(2**62) <= value <= 2**62:
            raise OverflowError(f"now_ns={value!r} is out of range")
        self._manual_now_ns = value

    @property
    def now_ms(self) -> int:
        """The timer's clock in whole milliseconds (rounded down)."""
        return self.now_ns // _NS_PER_MS

    @property
    def tick_ms(self) -> int:
        """Width of a level-0 bucket, in milliseconds."""
        return self._tick_ms

    @property
    def wheel(self) -> TimingWheel:
        """The level-0 TimingWheel."""
        return self._wheel

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._closed

    def _use_lanes(self, n: int) -> None:
        """Split this timer into ``n`` lanes, so threads adding to it share no lock.

        Each lane is a wheel, bucket queue, count and lock of its own.  A
        thread's ``schedule``/``schedule_as`` go to its lane (threads are
        numbered as they first add, lane = number % n), so threads that
        schedule and cancel on one timer touch neither the same lock nor
        the same cache lines.  ``add(task)`` moves a pending task within its
        lane and puts any other in the calling thread's lane (two threads
        adding one task take turns).  A task stays in its lane until
        it runs or is cancelled; polling and the queries (``len``,
        ``next_expiration_ms``, ``cancel_all``, ...) visit every lane, and
        polled tasks come out merged in expiration order (to the tick).
        SystemTimer does this on free-threaded builds
        (docs/freethreading.md); for a new timer with a real-time clock.

        :param n: the number of lanes, >= 1 (1: no lanes)
        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n`` < 1, the timer has a manual clock, or
            it already has lanes or tasks
        """
        # The twin checks the same and keeps one lane: its structures are
        # guarded by one module-wide lock (_LOCK), where lanes buy nothing.
        _check_positive(n, "n", 1)
        if self._manual:
            raise ValueError("a timer with a manual clock has one lane")
        if self._counter.value:
            raise ValueError("lanes are for a new timer (no lanes, no tasks yet)")

    @property
    def _lane_count(self) -> int:
        """How many lanes the timer has (1 unless split by _use_lanes)."""
        return 1

    def _lane_of(self, task: TimerTask) -> int | None:
        """The lane ``task`` is pending or expired in (0 unless laned), or None."""
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a TimerTask, got {task!r}")
        bucket = task._list
        if bucket is not None and bucket._counter is self._counter:
            return 0
        return None

    def __len__(self) -> int:
        return self._counter.value

    @property
    def next_expiration_ms(self) -> int | None:
        """When the next bucket is due (ms); now_ms if tasks are ready; None if idle."""
        with _LOCK:
            if self._ready:
                return self.now_ms
            return self._queue.next_expiration_ms

    # -- add / schedule ----------------------------------------------------
    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now.

        Re-adding a pending task moves it (the count is unchanged).

        Runtime complexity: O(levels).

        :raises TypeError: if ``task`` is not a TimerTask
        :raises RuntimeError: if the timer is closed, or the task is spent
        :raises ValueError: if the task is pending in another timer
        """
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a TimerTask, got {task!r}")
        with _LOCK:
            wake = _add(self, task, self.now_ns, _delay_to_ns(task._delay_ms), False)
        if wake:
            self._on_wake()

    def schedule(
        self,
        delay_ms: int | float,
        fn: Callable[..., Any],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> TimerTask:
        """Run ``fn(*args, **kwargs)`` in ``delay_ms`` milliseconds.

        Runtime complexity: O(levels).

        :return: the TimerTask, whose cancel() stops it
        :raises TypeError: if ``fn`` is not callable
        :raises RuntimeError: if the timer is closed
        """
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        delay_ns = _delay_to_ns(delay_ms)
        task = TimerTask(delay_ms, fn, *args, **kwargs)
        with _LOCK:
            wake = _add(self, task, self.now_ns, delay_ns, True)
        if wake:
            self._on_wake()
        return task

    def schedule_as(
        self,
        task_type: type[_T],
        delay_ms: int | float,
        fn: Callable[..., Any],
        /,
        *args: Any,
    ) -> _T:
        """Like schedule(), but the task is a new instance of ``task_type``.

        For TimerTask subclasses that add behaviour or slots (e.g. asyncio
        handles): the instance is made without calling ``__init__`` (its
        fields are set as ``TimerTask.__init__`` would) and added in the
        same call.

        Runtime complexity: O(levels).

        :return: the new ``task_type`` instance, already added
        :raises TypeError: if ``task_type`` is not a TimerTask subclass or
            ``fn`` is not callable
        """
        if not (isinstance(task_type, type) and issubclass(task_type, TimerTask)):
            raise TypeError(
                f"task_type must be a TimerTask subclass, got {task_type!r}"
            )
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        delay_ns = _delay_to_ns(delay_ms)
        task = task_type.__new__(task_type)
        TimerTask.__init__(task, delay_ms, fn, *args)
        with _LOCK:
            wake = _add(self, task, self.now_ns, delay_ns, False)
        if wake:
            self._on_wake()
        return task

    def _loop_call_later(
        self,
        delay: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> Any:
        """An event loop's ``call_later`` on this wheel (tickwheel's asyncio loop).

        ``delay`` in seconds; the handle is a new instance of the types given
        to :func:`_use_loop_handles`, with the current context (through the
        ``share`` given there) if it holds variables.  Anything else (a
        ``context``, a refused argument, no handle types) goes to the
        ``call_later`` given there, which checks and raises with the
        argument's name.  The loop installs this bound method as its own ``call_later``
        while no check is due (compiled: one C call, no Python frame).

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """
        # The layer's call_later is this method's Python form already.
        return _loop_slow("call_later", self, delay, callback, args, context)

    def _loop_call_at(
        self,
        when: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> Any:
        """An event loop's ``call_at`` on this wheel (tickwheel's asyncio loop).

        ``when`` in seconds on the wheel's clock; the handle keeps ``when``
        as its exact deadline.  Like :meth:`_loop_call_later` otherwise:
        anything unusual goes to the ``call_at`` given to
        :func:`_use_loop_handles`.

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """
        return _loop_slow("call_at", self, when, callback, args, context)

    def _on_wake(self) -> None:
        """Hook: a task became ready or an earlier bucket was queued."""

    # -- expire ------------------------------------------------------------
    def _take_ready(self) -> list[TimerTask]:
        """Remove and return tasks that were already due when added."""
        with _LOCK:
            ready = self._ready
            self._ready = []
            return ready

    def _take_due(self, now_ms: int, step: bool = False) -> list[TimerTask]:
        """Advance through every bucket due at ``now_ms``; return the expired tasks.

        Tasks come out in expiration order (to the tick).  With ``step=True``
        it stops after the first time slot that expired at least one task,
        so a discrete-event driver can run them before looking further.
        """
        with _LOCK:
            return _poll(self, now_ms, step)

    @property
    def next_precascade_ms(self) -> int | None:
        """When precascade() may next find work (ms, after now), or None.

        The earliest time later than now at which an overflow bucket's slot
        overlaps the lower level's reach by half (it becomes eligible), or
        the bucket being moved down may be passed over again.  A driver that
        sleeps until the next due bucket should also wake by then, or the
        work waits for the bucket's slot to start (SystemTimer's reaper does).

        Runtime complexity: O(levels x wheel_size).
        """
        with _LOCK:
            return _next_precascade(self)

    def precascade(self, max_entries: int = PRECASCADE_CHUNK) -> int:
        """Move tasks of the next overflow bucket down a level before it is due.

        Kafka cascades an overflow bucket when its slot starts, all at once:
        a bucket holding 100,000 tasks stalls the driver for milliseconds
        just when its first tasks fall due.  A driver with idle time calls
        this instead, repeatedly, until it returns 0.  Each call looks at up
        to ``max_entries`` tasks of the overflow bucket due soonest among
        those whose slot already overlaps the lower level's reach by at least
        half: a task the lower level can hold moves there now, the others
        go back to their bucket.  One pass visits each task once; a bucket
        is passed over again only after the lower level's reach grew by an
        eighth of the bucket's span, so the work stays bounded.

        Deadlines, order and counts are unchanged: a task only ever moves to
        the bucket it would have reached at its slot's start.  When nothing
        is due, the wheel's clock is first brought up to the timer's.

        Runtime complexity: O(max_entries + levels x wheel_size).

        :param max_entries: the most tasks to look at in this call, >= 1
        :return: how many tasks it looked at (0: nothing to do now)
        :raises TypeError: if ``max_entries`` is not an int
        :raises ValueError: if ``max_entries`` < 1
        """
        budget = _check_positive(max_entries, "max_entries", 1)
        with _LOCK:
            return _precascade(self, budget)

    def cancel_all(self) -> int:
        """Cancel every pending task; return how many were cancelled."""
        with _LOCK:
            tasks: list[TimerTask] = []
            wheel: TimingWheel | None = self._wheel
            while wheel is not None:
                for bucket in wheel._buckets:
                    tasks.extend(bucket.entries())  # type: ignore[arg-type]
                wheel = wheel._overflow
            tasks.extend(t for t in self._ready if t._state == _EXPIRED)
            self._ready = []
            n = 0
            for task in tasks:
                n += task.cancel()
            return n

    def _close_core(self) -> None:
        with _LOCK:
            self._closed = True
        self.cancel_all()

    def _run(
        self,
        tasks: Iterable[TimerTask],
        on_error: Callable[[TimerTask, BaseException], Any],
        set_clock: bool = False,
    ) -> int:
        """Run each task still expired (skipping cancelled/re-added ones).

        Exceptions (``Exception`` subclasses) go to ``on_error(task, exc)``;
        others propagate after the task is marked done.  With ``set_clock``
        the manual clock reads each task's expiration while it runs.

        :return: how many tasks ran
        """
        return _run_tasks(self, tasks, on_error, set_clock)

    def _check(self) -> None:
        """Raise AssertionError unless wheel, queue and counter agree."""
        with _LOCK:
            self._wheel._check()
            expired = sum(1 for t in self._ready if t._state == _EXPIRED)
            linked = self._wheel._linked()
            if self._counter.value < linked + expired:
                raise AssertionError(
                    f"counter {self._counter.value} < linked {linked} + ready {expired}"
                )
