"""The twin's nodes: TaskCounter, TimerTaskEntry and TimerTask.

Mirrors ``_wheel_task.pxi``: a task's state, cancel() and postpone(), which
places the task again through placement (:mod:`.place`).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, SupportsIndex, cast

from .checks import (
    _CANCELLED,
    _DONE,
    _EXPIRED,
    _IDLE,
    _LOCK,
    _MAX_EARLY_NS,
    _NS_PER_MS,
    _PENDING,
    _STATE_NAMES,
    _check_time,
    _delay_to_ns,
    _normalize_delay,
)
from .place import _add

if TYPE_CHECKING:
    from .bucket import TimerTaskList
    from .core import TimerCore


class TaskCounter:
    """A count of tasks shared by every bucket of one timer (Kafka's taskCounter)."""

    __slots__ = ("value", "_owner")

    def __init__(self) -> None:
        self.value: int = 0
        # weakref.ref to the TimerCore that made it (None otherwise), so that
        # TimerTask.postpone() finds a pending task's timer through its bucket.
        self._owner: weakref.ref[TimerCore] | None = None

    def __repr__(self) -> str:
        return f"<TaskCounter value={self.value}>"


class TimerTaskEntry:
    """A node of a TimerTaskList: an absolute expiration plus prev/next links."""

    __slots__ = ("_expiration_ms", "_prev", "_next", "_list")

    def __init__(self, expiration_ms: int = 0) -> None:
        self._expiration_ms = _check_time(expiration_ms, "expiration_ms")
        self._prev: TimerTaskEntry | None = None
        self._next: TimerTaskEntry | None = None
        self._list: TimerTaskList | None = None

    @property
    def expiration_ms(self) -> int:
        """Absolute expiration on the wheel's clock, in milliseconds."""
        return self._expiration_ms

    @expiration_ms.setter
    def expiration_ms(self, value: int) -> None:
        if self._next is not None:
            raise RuntimeError("cannot change expiration_ms of a linked entry")
        self._expiration_ms = _check_time(value, "expiration_ms")

    @property
    def list(self) -> TimerTaskList | None:
        """The bucket this entry is linked in, or None."""
        return self._list if self._next is not None else None

    @property
    def task(self) -> TimerTask | None:
        """The task this entry schedules: the entry itself for a TimerTask."""
        return self if isinstance(self, TimerTask) else None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} expiration_ms={self._expiration_ms}>"


class TimerTask(TimerTaskEntry):
    """A task to run once after ``delay_ms`` milliseconds.

    Pass a callable (and its arguments), or subclass and override :meth:`run`.
    A task is its own node in the timer's bucket list, so a pending timer is
    one object.  When a callable-backed task has run or been cancelled, the
    callable and its arguments are released (breaking reference cycles such
    as ``obj._timeout = timer.schedule(5, obj.on_timeout)``), and adding it
    again raises; a subclass that overrides :meth:`run` can be re-added.

    Runtime complexity: O(1) to create and to cancel.

    >>> task = TimerTask(10, print, "hello")
    >>> task.delay_ms, task.pending, task.cancelled
    (10, False, False)

    :param delay_ms: delay in milliseconds (int or float); negative means due
    :param fn: callable to run, or None when a subclass overrides run()
    :raises TypeError: if ``fn`` is not callable or ``delay_ms`` not a number
    :raises ValueError: if ``delay_ms`` is NaN or infinite
    """

    __slots__ = ("_fn", "_args", "_delay_ms", "_state", "_spent", "_early_ns")

    def __init__(
        self,
        delay_ms: int | float,
        fn: Callable[..., Any] | None = None,
        /,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self._expiration_ms = 0
        self._prev = self._next = None
        self._list = None
        self._delay_ms = _normalize_delay(delay_ms)
        if fn is not None and not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        if kwargs:
            if fn is None:
                raise TypeError("keyword arguments need fn")
            fn = partial(fn, *args, **kwargs)
            args = ()
        self._fn = fn
        self._args: tuple[Any, ...] = args
        self._state = _IDLE
        self._spent = False
        # How far the exact deadline of the last add lies before
        # expiration_ms (see deadline_ns), clamped as the compiled core does.
        self._early_ns = 0

    @property
    def delay_ms(self) -> int | float:
        """The delay, in milliseconds, applied each time the task is added."""
        return self._delay_ms

    @delay_ms.setter
    def delay_ms(self, value: int | float) -> None:
        self._delay_ms = _normalize_delay(value)

    @property
    def deadline_ns(self) -> int:
        """The exact deadline on the timer's clock (ns) that the last add computed.

        ``expiration_ms`` is this rounded up to the tick; a driver that wants
        asyncio's order runs one tick's tasks sorted by it (the wheel keeps
        a bucket in the order its tasks were linked, as Kafka does).  It lies
        at most 2**32 - 1 ns (about 4.3 s) before ``expiration_ms``.

        A caller that knows the deadline better than the clock read of the
        add (asyncio's ``call_at(when)``) may set it, within that range; the
        task stays in its bucket.

        :raises ValueError: if set after ``expiration_ms`` or too far before
        """
        return self._expiration_ms * _NS_PER_MS - self._early_ns

    @deadline_ns.setter
    def deadline_ns(self, value: int) -> None:
        end = self._expiration_ms * _NS_PER_MS
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise TypeError(f"deadline_ns must be an int, got {value!r}")
        v = operator.index(cast(SupportsIndex, value))
        if not end - _MAX_EARLY_NS <= v <= end:
            raise ValueError(
                f"deadline_ns must be in [{end - _MAX_EARLY_NS}, {end}] "
                f"(expiration_ms {self._expiration_ms}), got {value!r}"
            )
        self._early_ns = end - v

    @property
    def fn(self) -> Callable[..., Any] | None:
        """The callable run() calls, or None (subclass, or released after use)."""
        return self._fn

    @property
    def args(self) -> tuple[Any, ...]:
        """Positional arguments for fn."""
        return self._args

    @property
    def cancelled(self) -> bool:
        """True if cancel() stopped this task from running."""
        return self._state == _CANCELLED

    @property
    def pending(self) -> bool:
        """True while the task is added and has neither started nor been cancelled."""
        return self._state == _PENDING or self._state == _EXPIRED

    @property
    def done(self) -> bool:
        """True once run() has returned (or raised)."""
        return self._state == _DONE

    @property
    def state(self) -> str:
        """One of idle, pending, expired, running, done, cancelled."""
        return _STATE_NAMES[self._state]

    def run(self) -> None:
        """Run the task: call ``fn(*args)``.  Subclasses override this."""
        fn = self._fn
        if fn is not None:
            fn(*self._args)

    def cancel(self) -> bool:
        """Stop the task from running.

        Runtime complexity: O(1) (unlinks the node from its bucket).

        >>> TimerTask(5, print).cancel()   # never added: nothing to cancel
        False

        :return: True iff the task was pending (or linked in a bucket by
            TimerTaskList.add) and now never runs
        """
        with _LOCK:
            state = self._state
            if state == _PENDING:
                bucket = self._list
                if bucket is not None:
                    bucket._unlink(self)
            elif state == _EXPIRED:
                bucket = self._list
                if bucket is not None:
                    bucket._counter.value -= 1
                self._list = None
            elif state == _IDLE and self._next is not None and self._list is not None:
                # Linked by hand with TimerTaskList.add (Kafka's TimerTaskListTest).
                self._list._unlink(self)
            else:
                return False
            self._state = _CANCELLED
            self._release()
            return True

    def postpone(self, delay_ms: int | float) -> bool:
        """Move this pending task to run ``delay_ms`` from now (later or sooner).

        The same as ``task.delay_ms = delay_ms`` then ``timer.add(task)`` on
        the timer it is pending in, in one call: what a heartbeat or an idle
        timeout does on every message.  A task that was due but has not
        started yet is taken back.  If the timer refuses the new deadline,
        the task stays where it was.

        Runtime complexity: O(levels) (an O(1) unlink, then the add).

        >>> core = TimerCore(manual=True)
        >>> task = TimerTask(100, print, "late")
        >>> core.add(task)
        >>> task.postpone(250), task.expiration_ms, len(core)
        (True, 250, 1)
        >>> task.cancel(), task.postpone(10)
        (True, False)

        :param delay_ms: the new delay in milliseconds (int or float)
        :return: True if the task was pending and now runs ``delay_ms`` from
            now; False if it already started, ran or was cancelled (it is
            left alone: schedule a new task)
        :raises RuntimeError: if the task was never added to a timer, or its
            timer is gone or closed
        :raises TypeError: if ``delay_ms`` is not a number
        :raises ValueError: if ``delay_ms`` is NaN or infinite
        :raises OverflowError: if the deadline is out of the clock's range
        """
        with _LOCK:
            state = self._state
            if state != _PENDING and state != _EXPIRED:
                if state == _IDLE:
                    raise RuntimeError(
                        f"{self!r} was never added to a timer; "
                        "add it with timer.add(task)"
                    )
                return False
            bucket = self._list
            owner_ref = bucket._counter._owner if bucket is not None else None
            core = owner_ref() if owner_ref is not None else None
            if core is None:
                raise RuntimeError(f"{self!r} is not pending in a live timer")
            delay_ns = _delay_to_ns(delay_ms)
            old_delay = self._delay_ms
            self._delay_ms = _normalize_delay(delay_ms)
            try:
                wake = _add(core, self, core.now_ns, delay_ns, False)
            except BaseException:
                self._delay_ms = old_delay
                raise
        if wake:
            core._on_wake()
        return True

    def _release(self) -> None:
        # Drop the callable so no cycle through this (untracked) node survives.
        if self._fn is not None:
            self._fn = None
            self._args = ()
            self._spent = True

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} delay_ms={self._delay_ms!r} "
            f"state={_STATE_NAMES[self._state]} expiration_ms={self._expiration_ms}>"
        )
