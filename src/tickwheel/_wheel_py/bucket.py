"""The twin's bucket: TimerTaskList, a ring of entries.

Mirrors ``_wheel_bucket.pxi`` and ``_wheel_ring.pxi``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .checks import _LOCK, _check_time
from .task import TaskCounter, TimerTaskEntry


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
