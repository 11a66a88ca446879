"""The twin's nodes and buckets: TaskCounter, TimerTaskEntry, TimerTask, TimerTaskList.

Mirrors ``_wheel_task.pxi`` (a task's state, cancel() and postpone(), which
places the task again through placement, :mod:`.place`),
``_wheel_bucket.pxi`` and ``_wheel_ring.pxi`` (a bucket, a ring of nodes):
a node and its bucket refer to each other, so they share a module.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any, SupportsIndex, cast

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


class TaskCounter:
    """A count of tasks shared by every bucket of one timer (Kafka's taskCounter)."""

    __slots__ = ("value", "_owner")

    def __init__(self) -> None:
        self.value: int = 0
        # weakref.ref to the TimerCore that made it (None otherwise), so that
        # TimerTask.postpone() finds a pending task's timer through its bucket.
        self._owner: weakref.ref[Any] | None = None

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


def _break_ring(bucket: TimerTaskList) -> None:
    # Unlink every node of a bucket that is going away, tolerating a ring
    # already broken: in a cyclic-garbage batch finalizers run in any order.
    root = getattr(bucket, "_root", None)  # None if __init__ raised
    if root is None:
        return
    node = root._next
    while node is not None and node is not root:
        nxt = node._next
        node._prev = node._next = None
        node._list = None
        node = nxt
    root._prev = root._next = None


class TimerTaskList:
    """A bucket: a circular doubly-linked list of entries.

    Runtime complexity: O(1) add and remove; flush is O(n).

    :param counter: the TaskCounter shared by every bucket of one timer
    """

    __slots__ = ("_root", "_counter", "_expiration_ms", "_size")

    def __init__(self, counter: TaskCounter | None = None) -> None:
        root = TimerTaskEntry(0)
        root._prev = root._next = root
        self._root = root
        self._counter = counter if counter is not None else TaskCounter()
        self._expiration_ms: int | None = None
        self._size = 0

    @property
    def counter(self) -> TaskCounter:
        """The TaskCounter this bucket adds to and subtracts from."""
        return self._counter

    @property
    def expiration_ms(self) -> int | None:
        """Start of the time slot this bucket holds, or None when not queued."""
        return self._expiration_ms

    def set_expiration(self, expiration_ms: int | None) -> bool:
        """Set the slot time; return True iff it changed (queue the bucket then)."""
        if expiration_ms is not None:
            expiration_ms = _check_time(expiration_ms, "expiration_ms")
        changed = self._expiration_ms != expiration_ms
        self._expiration_ms = expiration_ms
        return changed

    def __len__(self) -> int:
        return self._size

    # ``_break`` is bound at definition: at interpreter shutdown module
    # globals may already be None when the last buckets are freed.
    def __del__(self, _break: Callable[[TimerTaskList], None] = _break_ring) -> None:
        # As the core's __dealloc__: entries keep their bucket alive, so this
        # runs for an empty bucket (break the sentinel's self-loop so
        # refcounting frees it, not the cyclic GC) or for garbage.
        _break(self)

    def add(self, entry: TimerTaskEntry) -> None:
        """Link ``entry`` at the tail, first unlinking it from any bucket it is in."""
        if not isinstance(entry, TimerTaskEntry):
            raise TypeError(f"entry must be a TimerTaskEntry, got {entry!r}")
        with _LOCK:
            if entry._next is not None:
                old = entry._list
                if old is not None:
                    old._unlink(entry)
            self._link(entry)

    def remove(self, entry: TimerTaskEntry) -> bool:
        """Unlink ``entry`` if it is in this bucket; return True iff it was."""
        with _LOCK:
            if entry._list is self and entry._next is not None:
                self._unlink(entry)
                return True
            return False

    def flush(self, fn: Callable[[TimerTaskEntry], Any]) -> int:
        """Unlink every entry, reset the expiration, then call ``fn(entry)`` on each.

        The entries are detached before the first call, so ``fn`` may add them
        back to this very bucket.

        :return: how many entries were flushed
        """
        with _LOCK:
            entries = []
            root = self._root
            node = root._next
            while node is not root:
                assert node is not None
                nxt = node._next
                self._unlink(node)
                entries.append(node)
                node = nxt
            self._expiration_ms = None
        for entry in entries:
            fn(entry)
        return len(entries)

    def entries(self) -> list[TimerTaskEntry]:
        """The linked entries, head to tail."""
        with _LOCK:
            out = []
            root = self._root
            node = root._next
            while node is not root:
                assert node is not None
                out.append(node)
                node = node._next
            return out

    def _link(self, entry: TimerTaskEntry) -> None:
        root = self._root
        tail = root._prev
        assert tail is not None
        entry._next = root
        entry._prev = tail
        entry._list = self
        tail._next = entry
        root._prev = entry
        self._size += 1
        self._counter.value += 1

    def _unlink(self, entry: TimerTaskEntry) -> None:
        prev, nxt = entry._prev, entry._next
        assert prev is not None and nxt is not None
        prev._next = nxt
        nxt._prev = prev
        entry._prev = entry._next = None
        entry._list = None
        self._size -= 1
        self._counter.value -= 1

    def _clear(self) -> None:
        # Break the ring (and every node's back-reference) without counting.
        root = self._root
        node = root._next
        while node is not root:
            assert node is not None
            nxt = node._next
            node._prev = node._next = None
            node._list = None
            node = nxt
        root._prev = root._next = root
        self._counter.value -= self._size
        self._size = 0
        self._expiration_ms = None

    def _check(self) -> None:
        """Raise AssertionError unless the ring is consistent."""
        root = self._root
        if root._list is not None:
            raise AssertionError("sentinel root must not belong to a list")
        count = 0
        node = root
        while True:
            nxt = node._next
            if nxt is None or nxt._prev is not node:
                raise AssertionError("broken prev/next links")
            if nxt is root:
                break
            if nxt._list is not self:
                raise AssertionError(f"{nxt!r} is linked here but points elsewhere")
            count += 1
            if count > self._size:
                raise AssertionError("more nodes than the recorded size")
            node = nxt
        if count != self._size:
            raise AssertionError(f"size {self._size} but {count} nodes")

    def __repr__(self) -> str:
        return f"<TimerTaskList size={self._size} expiration_ms={self._expiration_ms}>"
