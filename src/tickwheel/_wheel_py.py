"""Pure-Python twin of :mod:`tickwheel._wheel` (same names, same behaviour).

This module is the reference implementation and the type source for the
compiled core; :mod:`tickwheel._impl` picks it when the extension is missing,
on PyPy, or when ``TICKWHEEL_NO_EXTENSIONS=1``.  Read ``_wheel.pxd`` for the
design picture; in short:

* A :class:`TimerTaskList` (a *bucket*) is a circular doubly-linked list with
  a sentinel root, so linking and unlinking a node is O(1).
* A :class:`TimingWheel` is ``wheel_size`` buckets of ``tick_ms`` each; a
  deadline too far for it goes to a lazily created overflow wheel whose tick
  is this wheel's whole interval.  Adding costs O(levels).
* The :class:`DelayQueue` orders *buckets*, not tasks, so the driver wakes
  once per due time slot, not once per task.
* :class:`TimerCore` is the part of a timer that must be fast: it turns a delay
  into a tick-aligned expiration, inserts, cancels and expires.  It never
  calls user code except in :meth:`TimerCore._run`, the one place that runs
  expired tasks and routes their exceptions to one handler.

Unlike Kafka, a :class:`TimerTask` *is* its own list node (it subclasses
:class:`TimerTaskEntry`): one object per timer instead of two.

Thread safety: the extension's mutations are C code that never runs Python
code half-way, so the GIL serialises them.  This twin takes one module-wide
re-entrant lock for the same effect.
"""

from __future__ import annotations

import contextvars
import heapq
import math
import numbers
import operator
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, SupportsIndex, TypeVar, cast

__all__ = [
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "MAX_DELAY_MS",
    "DelayQueue",
    "TaskCounter",
    "TimerCore",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
]

DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20
PRECASCADE_CHUNK = 256
#: Largest accepted ``|delay_ms|``: about 146 years, so nanosecond deadlines
#: fit in a signed 64-bit integer on any monotonic clock reading.
MAX_DELAY_MS = 2**62 // 1_000_000
_MAX_TIME_MS = 2**62 // 1_000_000
# Latest deadline: its nanoseconds must fit an int64 (clock + MAX_DELAY_MS does).
_MAX_EXPIRATION_MS = (2**63 - 1) // 1_000_000
_NS_PER_MS = 1_000_000
# TimerTask._early_ns is a 32-bit field in the compiled core.
_MAX_EARLY_NS = 0xFFFFFFFF

# Task states.  A task is *counted* (``len(timer)``) while PENDING or EXPIRED.
_IDLE = 0  # never added, or re-armed state reset
_PENDING = 1  # linked in a bucket
_EXPIRED = 2  # due; handed to the runner, not started yet
_RUNNING = 3
_DONE = 4
_CANCELLED = 5
_STATE_NAMES = ("idle", "pending", "expired", "running", "done", "cancelled")

_LOCK = threading.RLock()
_T = TypeVar("_T", bound="TimerTask")
_monotonic_ns = time.monotonic_ns


def _check_time(value: object, name: str) -> int:
    """Return ``value`` as an int in the wheel's time range, or raise."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {value!r}")
    result = operator.index(cast(SupportsIndex, value))
    if not -_MAX_TIME_MS <= result <= _MAX_TIME_MS:
        raise OverflowError(f"{name}={value!r} is out of range")
    return result


def _check_positive(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {value!r}")
    result = operator.index(cast(SupportsIndex, value))
    if result < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if result > 2**62:
        raise OverflowError(f"{name}={value!r} is out of range")
    return result


def _check_reach(tick_ms: int, wheel_size: int) -> None:
    # Every deadline in the clock range must fit some level: an overflow wheel
    # whose interval would pass 2**62 ms cannot be built, and finding that out
    # half-way through an add would lose the task being moved.
    span = tick_ms * wheel_size
    while span <= 8 * _MAX_TIME_MS:
        if span * wheel_size > 2**62:
            raise ValueError(
                f"tick_ms={tick_ms} with wheel_size={wheel_size} cannot reach "
                f"MAX_DELAY_MS (overflow wheels would pass 2**62 ms); "
                "use a smaller wheel_size or tick_ms"
            )
        span *= wheel_size


def _past_clock_end(delay_ms: object, now_ms: int) -> None:
    raise OverflowError(
        f"delay_ms={delay_ms!r} from now_ms={now_ms} puts the deadline past "
        f"the end of the clock range ({_MAX_EXPIRATION_MS} ms)"
    )


def _use_loop_handles(plain: type, with_context: type) -> None:
    """Set the handle types of ``TimerCore._loop_call_later`` (asyncio's layer).

    :raises TypeError: if either is not a _LoopHandle subclass
    """
    # Only checked here: this twin's _loop_call_later/_loop_call_at are
    # TimerWheel.call_later/call_at, which make these very types.
    for cls in (plain, with_context):
        if not (isinstance(cls, type) and issubclass(cls, _LoopHandle)):
            raise TypeError(f"handle types must be _LoopHandle subclasses, got {cls!r}")


def _delay_to_ns(delay_ms: object) -> int:
    """Validate a delay in milliseconds and return it in nanoseconds (rounded up)."""
    if type(delay_ms) is int:
        if -MAX_DELAY_MS <= delay_ms <= MAX_DELAY_MS:
            return delay_ms * _NS_PER_MS
        raise OverflowError(
            f"delay_ms={delay_ms!r} is out of range [-{MAX_DELAY_MS}, {MAX_DELAY_MS}]"
        )
    if isinstance(delay_ms, bool):
        raise TypeError(f"delay_ms must be a number of milliseconds, got {delay_ms!r}")
    if hasattr(type(delay_ms), "__index__"):
        return _delay_to_ns(operator.index(cast(SupportsIndex, delay_ms)))
    if not isinstance(delay_ms, numbers.Real):
        raise TypeError(f"delay_ms must be a number of milliseconds, got {delay_ms!r}")
    value = float(delay_ms)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"delay_ms must be finite, got {delay_ms!r}")
    if not -MAX_DELAY_MS <= value <= MAX_DELAY_MS:
        raise OverflowError(
            f"delay_ms={delay_ms!r} is out of range [-{MAX_DELAY_MS}, {MAX_DELAY_MS}]"
        )
    return math.ceil(value * _NS_PER_MS)


def _normalize_delay(delay_ms: object) -> int | float:
    _delay_to_ns(delay_ms)
    if type(delay_ms) is int or type(delay_ms) is float:
        return delay_ms
    if hasattr(type(delay_ms), "__index__"):
        return operator.index(cast(SupportsIndex, delay_ms))
    return float(delay_ms)  # type: ignore[arg-type]


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
                wake = core._add(self, delay_ns)
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


class _LoopHandle(TimerTask):
    """The base of the asyncio loop's handles: a TimerTask with asyncio's when().

    ``_when_s`` is the ``when`` a ``call_at`` was given.  It is the answer
    only while the task's deadline is still the one it gave (the first
    nanosecond at or after it); after a postpone, or for a ``call_later``,
    ``when()`` is the exact deadline.  Either way a callback that reads the
    loop's clock never sees it below ``when()``.
    """

    # Unset until a call_at sets it (schedule_as runs TimerTask.__init__).
    __slots__ = ("_when_s",)
    _when_s: float

    def when(self) -> float:
        """The scheduled time in loop-time seconds, as asyncio's ``when()``.

        ``call_at(t).when() == t``; otherwise the exact deadline
        (``deadline_ns / 1e9``).  ``expiration_ms`` is the wheel's tick.
        """
        deadline = self.deadline_ns
        w = getattr(self, "_when_s", 0.0)
        if -9.0e9 < w < 9.0e9:  # NaN fails both
            num, den = w.as_integer_ratio()
            pinned = -((-num * _NS_PER_MS * 1000) // den)  # ceil(w * 10**9), exact
            # A deadline over 4.3 s in the past reads back clamped (deadline_ns).
            if pinned == deadline or (
                self._early_ns == _MAX_EARLY_NS and pinned < deadline
            ):
                return w
        return deadline / 1e9


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


class DelayQueue:
    """Buckets ordered by expiration: tells the driver when the next one is due.

    Runtime complexity: O(log b) offer and poll for b queued buckets (b is at
    most levels × wheel_size, about a hundred in practice).
    """

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def offer(self, bucket: TimerTaskList) -> bool:
        """Queue ``bucket`` at its expiration; return True iff it is the new head."""
        expiration = bucket._expiration_ms
        if expiration is None:
            raise ValueError("bucket has no expiration_ms")
        heap = self._heap
        head = heap[0][0] if heap else None
        self._seq += 1
        heapq.heappush(heap, (expiration, self._seq, bucket))
        return head is None or expiration < head

    def peek(self) -> TimerTaskList | None:
        """The bucket due first, or None."""
        return self._heap[0][2] if self._heap else None

    @property
    def next_expiration_ms(self) -> int | None:
        """Expiration of the bucket due first, or None when empty."""
        return self._heap[0][0] if self._heap else None

    def poll(self, now_ms: int) -> TimerTaskList | None:
        """Remove and return the head bucket if it is due at ``now_ms``, else None."""
        heap = self._heap
        if heap and heap[0][0] <= now_ms:
            return heapq.heappop(heap)[2]
        return None

    def _clear(self) -> None:
        self._heap.clear()

    def _check(self) -> None:
        """Raise AssertionError unless the heap is ordered and keys are current."""
        heap = self._heap
        for i, (key, _, bucket) in enumerate(heap):
            if bucket._expiration_ms != key:
                raise AssertionError(f"{bucket!r} queued at {key}")
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap) and heap[child][0] < key:
                    raise AssertionError("heap order violated")


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
            wake = self._add(task, _delay_to_ns(task._delay_ms))
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
            wake = self._add(task, delay_ns)
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
            wake = self._add(task, delay_ns)
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
        to :func:`_use_loop_handles`, with the current context (shared
        through ``self._share``) if it holds variables.  Anything else (a
        ``context``, a refused argument, no handle types) goes to
        ``self.call_later``, which checks and raises with the argument's
        name.  The loop installs this bound method as its own ``call_later``
        while no check is due (compiled: one C call, no Python frame).

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """
        # TimerWheel.call_later is this method's Python form already.
        slow: Any = self.call_later  # type: ignore[attr-defined]
        if context is None:
            return slow(delay, callback, *args)
        return slow(delay, callback, *args, context=context)

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
        anything unusual goes to ``self.call_at``.

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """
        slow: Any = self.call_at  # type: ignore[attr-defined]
        if context is None:
            return slow(when, callback, *args)
        return slow(when, callback, *args, context=context)

    def _add(self, task: TimerTask, delay_ns: int) -> bool:
        # Returns True when the driver must wake: the task is ready, or its
        # bucket became the queue's head.
        if self._closed:
            raise RuntimeError("timer is closed")
        if task._spent:
            raise RuntimeError(
                f"{task!r} has run or been cancelled and released its callable; "
                "schedule a new task"
            )
        now_ns = self.now_ns
        deadline_ns = now_ns + delay_ns
        # Round up to the millisecond, then up to the tick: never early.
        expiration = -((-deadline_ns) // _NS_PER_MS)
        tick = self._tick_ms
        expiration = -((-expiration) // tick) * tick
        if expiration > _MAX_EXPIRATION_MS:
            # Refused before anything moves (a re-added task stays put).
            _past_clock_end(task._delay_ms, now_ns // _NS_PER_MS)
        state = task._state
        if state == _PENDING or state == _EXPIRED:
            owner = task._list
            if owner is not None and owner._counter is not self._counter:
                raise ValueError(f"{task!r} is pending in another timer")
            if state == _PENDING:
                if owner is not None:
                    owner._unlink(task)
            else:
                self._counter.value -= 1
                task._list = None
                # A due task re-added before it ran leaves the ready list, so
                # it is never listed twice (a stale entry would run it ahead
                # of tasks due before it once it came due again).
                ready = self._ready
                for i in range(len(ready) - 1, -1, -1):
                    if ready[i] is task:
                        del ready[i]
                        break
        task._expiration_ms = expiration
        task._early_ns = min(expiration * _NS_PER_MS - deadline_ns, _MAX_EARLY_NS)
        task._state = _PENDING
        before = len(self._queue._heap)
        # "Due" is judged on the timer's clock: the wheel's own clock only
        # moves when a bucket is polled and may lag behind it.
        if expiration * _NS_PER_MS > now_ns and self._wheel._add(task):
            heap = self._queue._heap
            return len(heap) > before and heap[0][2] is task._list
        self._expire(task)
        self._ready.append(task)
        return True

    def _expire(self, task: TimerTask) -> None:
        task._state = _EXPIRED
        task._list = self._expired
        self._counter.value += 1

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
            expired = self._ready
            n_ready = len(expired)
            self._ready = []
            queue = self._queue
            wheel = self._wheel
            last = None
            while True:
                head = queue.next_expiration_ms
                if head is None or head > now_ms:
                    break
                if step and expired and last is not None and head > last:
                    break
                bucket = queue.poll(now_ms)
                assert bucket is not None
                last = head
                wheel._advance(head)
                root = bucket._root
                node = root._next
                while node is not root:
                    assert node is not None
                    bucket._unlink(node)
                    if not wheel._add(node):
                        self._expire(node)  # type: ignore[arg-type]
                        expired.append(node)  # type: ignore[arg-type]
                    node = root._next
                bucket._expiration_ms = None
            if n_ready and len(expired) > n_ready:
                return _in_expiration_order(expired, n_ready)
            return expired

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
            now_ms = self.now_ns // _NS_PER_MS
            lower = self._wheel
            wheel = lower._overflow
            best: int | None = None
            while wheel is not None:
                span = wheel._tick_ms
                for bucket in wheel._buckets:
                    expiration = bucket._expiration_ms
                    if not bucket._size or expiration is None:
                        continue
                    # precascade's test: 2 * (horizon - expiration) >= span.
                    need = expiration + (span + 1) // 2
                    if (
                        bucket is self._pc_bucket
                        and expiration == self._pc_expiration
                        and self._pc_left <= 0
                        and self._pc_horizon >= 0
                    ):
                        step = span // 8 if span >= 8 else 1
                        need = max(need, self._pc_horizon + step)
                    # The lower level's horizon at t: t to its tick, plus its reach.
                    tick = lower._tick_ms
                    at = -((lower._interval_ms - need) // tick) * tick
                    if at > now_ms and (best is None or at < best):
                        best = at
                lower = wheel
                wheel = wheel._overflow
            return best

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
            return self._precascade(budget)

    def _precascade(self, budget: int) -> int:
        lower = self._wheel
        wheel = lower._overflow
        best: TimerTaskList | None = None
        best_horizon = best_span = best_expiration = 0
        now_ms = self.now_ns // _NS_PER_MS
        head = self._queue.next_expiration_ms
        if now_ms > lower._current_time_ms and (head is None or head > now_ms):
            # Nothing is due: bring the wheel's clock (which only moves when a
            # bucket is polled) up to the timer's, as a poll at now would.
            lower._advance(now_ms)
        while wheel is not None:
            horizon = lower._current_time_ms + lower._interval_ms
            for bucket in wheel._buckets:
                expiration = bucket._expiration_ms
                if (
                    bucket._size
                    and expiration is not None
                    and (best is None or expiration < best_expiration)
                    and 2 * (horizon - expiration) >= wheel._tick_ms
                ):
                    best = bucket
                    best_expiration = expiration
                    best_horizon = horizon
                    best_span = wheel._tick_ms
            lower = wheel
            wheel = wheel._overflow
        if best is None:
            return 0
        if best is not self._pc_bucket or best_expiration != self._pc_expiration:
            self._pc_bucket = best
            self._pc_expiration = best_expiration
            self._pc_left = 0
            self._pc_horizon = -1
        if self._pc_left <= 0:
            step = best_span // 8 if best_span >= 8 else 1
            if self._pc_horizon >= 0 and best_horizon - self._pc_horizon < step:
                return 0
            self._pc_left = best._size
            self._pc_horizon = best_horizon
        n = min(budget, self._pc_left)
        root = best._root
        looked = 0
        while looked < n:
            node = root._next
            if node is root:
                self._pc_left = 0
                break
            assert node is not None
            best._unlink(node)
            # Lands lower if it fits, else back at this bucket's tail (the
            # level's clock has not moved, so its slot is the same one).
            if not self._wheel._add(node):
                self._expire(node)  # type: ignore[arg-type]
                self._ready.append(node)  # type: ignore[arg-type]
            looked += 1
        self._pc_left -= looked
        return looked

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
        ran = 0
        for task in tasks:
            with _LOCK:
                if task._state != _EXPIRED:
                    continue
                task._state = _RUNNING
                bucket = task._list
                if bucket is not None:
                    bucket._counter.value -= 1
                task._list = None
                if set_clock:
                    at = task._expiration_ms * _NS_PER_MS
                    if at > self._manual_now_ns:
                        self._manual_now_ns = at
            ran += 1
            try:
                if type(task) is TimerTask:
                    fn = task._fn
                    if fn is not None:
                        fn(*task._args)
                else:
                    task.run()
            except Exception as exc:
                on_error(task, exc)
            finally:
                with _LOCK:
                    if task._state == _RUNNING:
                        task._state = _DONE
                        task._release()
        return ran

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
