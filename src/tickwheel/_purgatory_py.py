"""Pure-Python twin of ``_purgatory.pyx``: the purgatory's hot paths, readable.

Same names, signatures and docstrings as the compiled module (checked by
``tests/test_twin_parity.py``); ``tickwheel._impl`` imports one or the other,
and ``purgatory.py`` builds the public :class:`DelayedOperationPurgatory` on
the chosen ``_PurgatoryCore``.  See ``purgatory.py`` for the design, the
worked example and the thread-safety protocol, and ``_purgatory.pxd`` for
what the compiled module stores in C and why.

* :class:`DelayedOperation` extends the twin's ``TimerTask``
  (``_wheel_py``), as the compiled one extends ``_wheel.TimerTask``: the
  operation is its own timer node, so its timeout is cancelled in O(1).
* ``_Shard`` is one slice of the key space: a lock and a key -> watchers dict.
* ``_PurgatoryCore`` holds the two hot methods, try_complete_else_watch and
  check_and_complete.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Hashable, Iterable
from threading import get_ident
from typing import TYPE_CHECKING, Any, TypeVar

from ._wheel_py import TimerTask

# The timer entry's own cancel: an operation's completion unlinks it even if
# a subclass overrides cancel() (the compiled core calls the C body).
_cancel = TimerTask.cancel

__all__ = ["CountdownOperation", "DelayedOperation"]

logger = logging.getLogger("tickwheel")

# The lock each operation and shard gets (the compiled module: its _Lock).
_allocate_lock = threading.Lock


def _check_lock(lock: Any) -> None:
    if not (
        callable(getattr(lock, "acquire", None))
        and callable(getattr(lock, "release", None))
        and hasattr(lock, "__enter__")
        and hasattr(lock, "__exit__")
    ):
        raise TypeError(
            f"lock must be a threading.Lock/RLock-like object, got {lock!r}"
        )


class DelayedOperation(TimerTask):
    """An operation that completes when its condition holds or when it times out.

    Subclass it and override :meth:`try_complete` (check the condition; when it
    holds, ``return self.force_complete()``), :meth:`on_complete` (runs exactly
    once, whichever path completes it) and optionally :meth:`on_expiration`
    (runs after ``on_complete`` iff the timer completed it; :attr:`expired` is
    already True inside ``on_complete`` then).  The operation is its own
    :class:`~tickwheel.TimerTask`, so its timeout is cancelled in O(1).

    Runtime complexity: O(1) to create, complete or expire.

    >>> class Once(DelayedOperation):
    ...     def try_complete(self):
    ...         return self.force_complete()
    ...     def on_complete(self):
    ...         print("done")
    >>> op = Once(100)
    >>> op.try_complete(), op.completed, op.try_complete()
    done
    (True, True, False)

    :param delay_ms: timeout in milliseconds
    :param lock: a ``threading.Lock``/``RLock`` to share with other operations
        (default: a new ``Lock``); try_complete, on_complete and on_expiration
        run under it
    :raises TypeError: if ``lock`` lacks acquire/release or ``delay_ms`` is no number
    """

    # State lives in slots named ``_op_*`` so they never collide with the
    # core's own fields.  ``_op_done`` is the one flag hot loops read: it turns
    # True, under the operation's lock, when the operation completes or is
    # withdrawn by :meth:`DelayedOperationPurgatory.cancel_for_key`.
    # ``_op_holder`` is the id of the thread that holds the lock on the
    # operation's behalf, so that ``force_complete`` called from inside
    # ``try_complete`` does not try to take a plain ``Lock`` a second time.
    #
    # ``_op_retry`` is Kafka's ``tryCompletePending``: a thread that wants to
    # try the operation but finds its lock taken sets it, and the thread that
    # holds the lock tries again after releasing it (see
    # :meth:`DelayedOperationPurgatory.check_and_complete`).  That hand-off is
    # only sound when every holder of the lock is a purgatory path that looks
    # at the flag, i.e. for the operation's own private lock; ``_op_trylock``
    # is False for a lock passed in (shared) or handed out by :attr:`lock`,
    # and then threads wait for the lock instead.

    __slots__ = (
        "_op_lock",
        "_op_holder",
        "_op_done",
        "_op_withdrawn",
        "_op_expired",
        "_op_submitted",
        "_op_retry",
        "_op_trylock",
    )

    _op_lock: Any
    _op_holder: int
    _op_done: bool
    _op_withdrawn: bool
    _op_expired: bool
    _op_submitted: bool
    _op_retry: bool
    _op_trylock: bool

    def __init__(self, delay_ms: int | float, lock: Any = None) -> None:
        # TimerTask.__init__ through a module global (one attribute lookup
        # less): creating operations is on the purgatory's hot path.
        _task_init(self, delay_ms)
        if lock is None:
            self._op_lock = _allocate_lock()
            self._op_trylock = True
        else:
            _check_lock(lock)
            self._op_lock = lock
            self._op_trylock = False
        self._op_holder = 0
        self._op_done = False
        self._op_withdrawn = False
        self._op_expired = False
        self._op_submitted = False
        self._op_retry = False

    # -- subclass hooks -----------------------------------------------------
    def try_complete(self) -> bool:
        """Check the condition; if it holds, ``return self.force_complete()``.

        Subclasses override this.  The purgatory calls it with the lock held.

        :return: True iff this call completed the operation
        """
        raise NotImplementedError(f"{type(self).__name__} must override try_complete()")

    def on_complete(self) -> None:
        """Called exactly once, under the lock, by whichever path completes it."""

    def on_expiration(self) -> None:
        """Called after :meth:`on_complete`, under the lock, iff the timer won."""

    # -- completion -----------------------------------------------------------
    def force_complete(self) -> bool:
        """Complete now unless already completed: cancel the timeout, run on_complete.

        Safe to call from any thread and from inside :meth:`try_complete`.
        When another thread completes it first, this returns False.  If you call
        it while holding a *shared* lock yourself, pass an ``RLock``.

        Runtime complexity: O(1).

        :return: True for the one caller that completed the operation
        """
        if self._op_done:
            return False
        if self._op_holder == get_ident():
            # Inside try_complete: the lock is already ours (the hot path).
            self._op_done = True
            _cancel(self)
            self.on_complete()
            return True
        lock = self._op_lock
        lock.acquire()
        self._op_holder = get_ident()
        try:
            return self._complete_locked()
        finally:
            self._op_holder = 0
            lock.release()

    def _complete_locked(self) -> bool:
        # Caller holds the lock: the check-and-set below is atomic.
        if self._op_done:
            return False
        self._op_done = True
        _cancel(self)  # the TimerTask entry: O(1) unlink
        self.on_complete()
        return True

    def run(self) -> None:
        """Timer callback: complete the operation as expired (Kafka's ``run``)."""
        lock = self._op_lock
        lock.acquire()
        self._op_holder = get_ident()
        try:
            if self._op_done:
                return
            self._op_done = True
            self._op_expired = True
            self.on_complete()
            self.on_expiration()
        finally:
            self._op_holder = 0
            lock.release()

    def _withdraw(self) -> bool:
        """Withdraw (never to complete), cancel the timeout; True iff it was open."""
        if self._op_holder == get_ident():
            return self._withdraw_locked()
        with self._op_lock:
            self._op_holder = get_ident()
            try:
                return self._withdraw_locked()
            finally:
                self._op_holder = 0

    def _withdraw_locked(self) -> bool:
        if self._op_done:
            return False
        self._op_done = True
        self._op_withdrawn = True
        _cancel(self)
        return True

    # -- state ------------------------------------------------------------------
    @property
    def completed(self) -> bool:
        """True once on_complete has been started by some path (Kafka's isCompleted)."""
        return self._op_done and not self._op_withdrawn

    @property
    def expired(self) -> bool:
        """True iff the timer completed it (set before on_complete runs)."""
        return self._op_expired

    @property
    def withdrawn(self) -> bool:
        """True iff cancel_for_key removed it before it completed."""
        return self._op_withdrawn

    @property
    def lock(self) -> Any:
        """The lock held around try_complete, on_complete and on_expiration.

        Once handed out, other code may hold it, so from then on purgatory
        threads wait for it rather than leave a retry to its holder.
        """
        self._op_trylock = False
        return self._op_lock

    def __repr__(self) -> str:
        return f"<{type(self).__name__} delay_ms={self.delay_ms!r} {_state(self)}>"


_task_init = TimerTask.__init__


def _state(op: DelayedOperation) -> str:
    # An operation's state as its repr shows it.
    if op._op_withdrawn:
        return "withdrawn"
    if op._op_expired:
        return "expired"
    if op._op_done:
        return "completed"
    return "open"

_Op = TypeVar("_Op", bound=DelayedOperation)


def _new_operation(cls: type[_Op], delay_ms: int | float) -> _Op:
    """A new ``cls`` with ``delay_ms`` and a private lock, without calling its __init__.

    For DelayedOperation subclasses created by the million that fill their
    own fields right after (say one operation per replayed request):
    the state is what ``DelayedOperation.__init__(op, delay_ms)`` leaves.

    :raises TypeError: if ``cls`` is not a DelayedOperation subclass, or as
        DelayedOperation for ``delay_ms``
    """
    if not (isinstance(cls, type) and issubclass(cls, DelayedOperation)):
        raise TypeError(f"cls must be a DelayedOperation subclass, got {cls!r}")
    op = cls.__new__(cls)
    DelayedOperation.__init__(op, delay_ms)
    return op


class CountdownOperation(DelayedOperation):
    """A DelayedOperation that completes once :meth:`count_down` has taken its
    count to zero (Kafka's DelayedProduce waits for its partitions' acks
    this way), or expires after ``delay_ms``.

    Its ``try_complete`` is one comparison in C and its ``on_complete``
    calls ``callback(op)``, so a purgatory runs no Python code per try:
    the shape for operations created by the hundred thousand.  Events call
    ``count_down()`` and then the purgatory's ``check_and_complete(key)``
    as for any operation; ``count_down`` alone completes nothing.
    Subclasses may override the hooks like any DelayedOperation's.

    Runtime complexity: O(1) to create, count down, complete or expire.

    >>> from tickwheel import CountdownOperation, DelayedOperationPurgatory, MockTimer
    >>> timer = MockTimer()
    >>> purgatory = DelayedOperationPurgatory("acks", timer)
    >>> def done(op):
    ...     print("expired" if op.expired else "acked")
    >>> op = CountdownOperation(500, done, 2)
    >>> purgatory.try_complete_else_watch(op, ["topic-0"])
    False
    >>> op.count_down(), purgatory.check_and_complete("topic-0")
    (1, 0)
    >>> op.count_down(), purgatory.check_and_complete("topic-0")
    acked
    (0, 1)

    :param delay_ms: timeout in milliseconds
    :param callback: called as ``callback(op)`` exactly once, under the lock,
        when the operation completes or expires (``op.expired`` says which);
        None for no call.  The operation drops it after the call.
    :param count: events to wait for, an int >= 0 (0: completes on the first try)
    :param lock: as for DelayedOperation
    :raises TypeError: if ``callback`` is not callable or ``count`` is not an int
    :raises ValueError: if ``count`` is negative
    """

    __slots__ = ("_count", "_callback", "_count_lock")

    _count: int
    _callback: Callable[[CountdownOperation], Any] | None

    def __init__(
        self,
        delay_ms: int | float,
        callback: Callable[[CountdownOperation], Any] | None = None,
        count: int = 1,
        lock: Any = None,
    ) -> None:
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {callback!r}")
        n = _count_arg(count, "count")
        DelayedOperation.__init__(self, delay_ms, lock)
        self._callback = callback
        # The count's own lock (the compiled class: the object's critical
        # section): count_down may run under the operation's lock or not.
        self._count_lock = threading.Lock()
        self._count = n

    @property
    def count(self) -> int:
        """Events still awaited (0 once the countdown is done)."""
        return self._count

    def count_down(self, n: int = 1) -> int:
        """Take ``n`` (an int >= 0, default 1) off the count; it stops at 0.

        Safe from any thread.  It does not complete the operation: call the
        purgatory's ``check_and_complete`` for a key the operation watches
        (or :meth:`force_complete`).

        :return: the count left
        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n`` is negative
        """
        k = _count_arg(n, "n")
        with self._count_lock:
            left = self._count - k if self._count > k else 0
            self._count = left
        return left

    def try_complete(self) -> bool:
        """Complete iff the count is zero."""
        if self._count:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        """Call ``callback(self)`` (if one was given), then drop it."""
        callback = self._callback
        if callback is not None:
            self._callback = None
            callback(self)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} delay_ms={self.delay_ms!r} "
            f"count={self.count} {_state(self)}>"
        )


def _count_arg(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    if value > sys.maxsize:
        raise ValueError(f"{name} must be <= {sys.maxsize}, got {value!r}")
    return value


class _Shard:
    """A slice of the key space: key -> watcher list, and the lock writers take."""

    __slots__ = ("lock", "watchers")

    def __init__(self) -> None:
        self.lock: threading.Lock = _allocate_lock()
        self.watchers: dict[Hashable, list[DelayedOperation]] = {}


def _hash_key(key: object, what: str) -> int:
    try:
        return hash(key)
    except TypeError:
        raise TypeError(f"{what} must be hashable, got {key!r}") from None


def _hand_off(op: DelayedOperation) -> bool:
    """``op``'s private lock is taken: leave its holder a retry, or take the lock.

    Sets ``_op_retry`` (Kafka's ``tryCompletePending``), then tries the lock
    once more: if its holder released it meanwhile, possibly before seeing
    the flag, this thread holds it now and tries itself (True).  Otherwise the
    holder, or whoever takes the lock next, clears the flag only under the
    lock before trying (so it sees this thread's event) and re-checks it
    after releasing.  If the lock was handed out by :attr:`lock` meanwhile,
    its holder may not look at the flag, so this thread waits for it.

    :return: True iff the caller now holds the lock and must try ``op``
    """
    op._op_retry = True
    lock = op._op_lock
    if not lock.acquire(False):
        if op._op_trylock:
            return False
        lock.acquire()
    # This thread tries now, after every event that set the flag so far.
    op._op_retry = False
    return True


class _PurgatoryCore:
    """The hot paths of DelayedOperationPurgatory (try, watch, check)."""

    _name: str
    _timer: Any
    _purge_interval: int
    _shards: list[_Shard]
    _mask: int
    _estimated: int
    _shut: bool
    _op_types: set[type]
    _c_timer: bool  # the compiled core's flag; the twin always calls the timer

    if TYPE_CHECKING:

        def _check_op_type(self, operation: object) -> None: ...

        @staticmethod
        def _keys_tuple(keys: Iterable[Hashable]) -> tuple[Hashable, ...]: ...

        def _purge_if_due(self) -> None: ...

    def try_complete_else_watch(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> bool:
        """Complete ``operation`` now if it can, else watch it under ``keys``, timed.

        Under the operation's lock: try; if not complete, add it to the watcher
        list of every key, then try once more (so an event between the first
        try and the watch is not missed); if still not complete, add it to the
        timer, and cancel that timer entry if it completed meanwhile.  An event
        whose check found the lock taken while this call held it is honoured
        by trying again after the lock is released (see
        :meth:`check_and_complete`).

        Runtime complexity: O(len(keys) + timer levels).

        :param operation: a DelayedOperation not submitted before
        :param keys: a non-empty iterable of hashable keys (duplicates count once)
        :return: True iff the operation completed during this call
        :raises TypeError: if ``operation`` is not a DelayedOperation for this
            timer's core, ``keys`` is a str/bytes or not iterable, or a key is
            unhashable
        :raises ValueError: if ``keys`` is empty or the operation was submitted
        :raises RuntimeError: after shutdown()
        Nothing is registered when it raises one of these.
        """
        keys = self._submit_keys(operation, keys)
        ident = get_ident()
        lock = operation._op_lock
        completed = False
        error: BaseException | None = None
        lock.acquire()
        operation._op_holder = ident
        try:
            if operation.try_complete():
                return True
            self._watch(operation, keys)
            try:
                completed = operation.try_complete()
            except BaseException as exc:  # still time it out, then re-raise
                error = exc
        finally:
            operation._op_holder = 0
            lock.release()
        if operation._op_retry and not operation._op_done:
            # A check found the lock taken while we held it: try for it.
            try:
                completed = self._retry(operation, ident) or completed
            except BaseException as exc:
                if error is None:
                    error = exc
        if not operation._op_done:
            self._timer.add(operation)
            if operation._op_done:
                # Completed between the unlock and the add: drop the timer entry.
                _cancel(operation)
        if self._estimated - len(self._timer) > self._purge_interval:
            self._purge_if_due()
        if error is not None:
            raise error
        return completed

    def _submit_keys(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> tuple[Hashable, ...] | list[Hashable]:
        """Check ``operation`` and ``keys`` for try_complete_else_watch, then mark
        the operation submitted.

        Every key is validated before anything is registered; equal keys count
        once.

        :return: the keys as a tuple or list, each once
        :raises: what try_complete_else_watch raises for its arguments
        """
        if self._shut:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")
        if type(operation) not in self._op_types:
            self._check_op_type(operation)
        if operation._op_submitted or operation._op_done:
            raise ValueError(
                f"operation {operation!r} was already submitted or completed"
            )
        if type(keys) is not tuple and type(keys) is not list:
            keys = self._keys_tuple(keys)
        n = len(keys)
        try:
            if n == 1:
                hash(keys[0])
            elif n == 0:
                raise ValueError(f"keys must not be empty, got {keys!r}")
            elif len(set(keys)) != n:
                keys = tuple(dict.fromkeys(keys))
        except TypeError:
            for key in keys:
                _hash_key(key, f"key {key!r} in keys")
            raise
        operation._op_submitted = True
        return keys

    def _watch(
        self, operation: DelayedOperation, keys: tuple[Hashable, ...] | list[Hashable]
    ) -> None:
        # Append the operation to each key's watcher list, under the key's
        # shard lock (the caller holds the operation's lock).
        shards = self._shards
        mask = self._mask
        for key in keys:
            shard = shards[hash(key) & mask]
            shard_lock = shard.lock
            shard_lock.acquire()
            try:
                ops = shard.watchers.get(key)
                if ops is None:
                    shard.watchers[key] = [operation]
                else:
                    ops.append(operation)
            finally:
                shard_lock.release()
        self._estimated += 1

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watching ``key``; drop completed entries.

        Call it after an event that may satisfy operations watching ``key``.
        Each operation's ``try_complete`` runs under its lock, outside the
        watcher list's lock.  A key whose list becomes empty disappears.  If
        try_complete/on_complete raises, the other operations are still tried
        and the first exception is re-raised at the end.

        An operation whose own (private) lock is held by another thread right
        now (the timer expiring it, another check, try_complete_else_watch) is
        not waited for: this call flags it, and the holder tries it again
        after releasing the lock (Kafka's ``maybeTryComplete``), so the event
        is still seen.  Operations on a shared lock are waited for.

        Runtime complexity: O(operations watching ``key``), one pass.

        :return: how many operations this call completed
        :raises TypeError: if ``key`` is unhashable
        """
        try:
            shard = self._shards[hash(key) & self._mask]
        except TypeError:
            raise TypeError(f"key must be hashable, got {key!r}") from None
        # A dict read is atomic; writers (watch, compaction) take shard.lock.
        ops = shard.watchers.get(key)
        if ops is None:
            return 0
        ident = get_ident()
        completed = 0
        dropped = 0
        errors: list[BaseException] = []
        # The entries there now: one appended after this read is re-tried by
        # its own watcher (the second try in try_complete_else_watch).  The
        # scan only counts the done ones; _compact copies the live ones once.
        for op in ops[:]:
            if op._op_done:
                dropped += 1
                continue
            if type(op) is CountdownOperation and op._count:
                # Not ready, so its try_complete would return False: skip the
                # lock.  The count only falls, and the thread that takes it to
                # zero checks a key of the operation afterwards.
                continue
            if self._try_watched(op, ident, errors):
                completed += 1
            if op._op_done:
                dropped += 1  # completed by this call or by another thread
        if dropped:
            _compact(shard, key)
        if errors:
            raise errors[0]
        return completed

    def _try_watched(
        self, op: DelayedOperation, ident: int, errors: list[BaseException]
    ) -> bool | None:
        """Try one open operation of a watcher list, for check_and_complete.

        Takes the operation's lock, or leaves a retry to the thread holding
        its private lock (see :func:`_hand_off`).  An exception from
        try_complete/on_complete goes to ``errors`` if it is the first of the
        scan, and to the log otherwise.

        :return: True iff this call completed ``op``; None if another thread
            completed it meanwhile; False if it stays watched
        """
        lock = op._op_lock
        if not op._op_trylock:
            lock.acquire()  # a shared lock: wait for it
        elif not lock.locked():
            # Free a moment ago (if another thread took it meanwhile,
            # this waits for it, which is merely slower).  acquire()
            # with no argument is the cheapest call the lock offers.
            lock.acquire()
        elif not _hand_off(op):
            return False  # its holder tries again for us
        op._op_holder = ident
        try:
            ok = op.try_complete()
        except BaseException as exc:
            ok = False
            self._note_error(errors, op, exc)
        finally:
            op._op_holder = 0
            lock.release()
        if op._op_retry:
            # Flagged by another thread while we held the lock (or
            # before): try again.  The flag is cleared under the lock
            # only by the thread about to try, so it is never lost.
            try:
                ok = self._retry(op, ident) or ok
            except BaseException as exc:
                self._note_error(errors, op, exc)
            if not ok and op._op_done:
                return None
        return ok

    def _note_error(
        self, errors: list[BaseException], op: DelayedOperation, exc: BaseException
    ) -> None:
        # The first exception of a scan is re-raised at its end; later ones
        # are logged, so no operation goes untried.
        if errors:
            self._log_error(op, exc)
        else:
            errors.append(exc)

    @staticmethod
    def _retry(op: DelayedOperation, ident: int) -> bool:
        """Try ``op`` again while other threads keep flagging it (Kafka's retry loop).

        Called by a thread that has just released ``op``'s lock and found
        ``_op_retry`` set.  If the lock is taken again, its new holder clears
        the flag before trying (so it sees the event) or finds it set after.

        :return: True iff this call completed ``op``
        """
        lock = op._op_lock
        completed = False
        while op._op_retry and not op._op_done:
            if not lock.acquire(False):
                return completed
            op._op_retry = False
            op._op_holder = ident
            try:
                if op.try_complete():
                    completed = True
            finally:
                op._op_holder = 0
                lock.release()
        return completed

    def _log_error(self, op: DelayedOperation, exc: BaseException) -> None:
        logger.error(
            "purgatory %r: try_complete of %r raised", self._name, op, exc_info=exc
        )

    def _purge_lists(self) -> int:
        """Drop every done operation from every watcher list; how many entries went."""
        purged = 0
        for shard in self._shards:
            with shard.lock:
                watchers = shard.watchers
                for key, ops in list(watchers.items()):
                    keep = _live(ops)
                    if keep is None:
                        continue
                    purged += len(ops) - len(keep)
                    if keep:
                        watchers[key] = keep
                    else:
                        del watchers[key]
        return purged


def _live(ops: list[DelayedOperation]) -> list[DelayedOperation] | None:
    # The operations of ``ops`` not done, in order, or None if all are.
    keep = [op for op in ops if not op._op_done]
    return None if len(keep) == len(ops) else keep


def _compact(shard: _Shard, key: Hashable) -> int:
    # Drop the done operations from ``key``'s list: a new list installed in
    # its place (lists are replaced, never edited, so a concurrent scan of
    # the old one never skips an entry); the key goes with its last one.
    # Returns how many entries went.  The compiled core edits the list in
    # place when no scan is in progress (GIL builds), which saves it an
    # allocation; the twin's scans read a copy, and it always replaces.
    with shard.lock:
        watchers = shard.watchers
        ops = watchers.get(key)
        if ops is None:
            return 0
        keep = _live(ops)
        if keep is None:
            return 0
        if keep:
            watchers[key] = keep
        else:
            del watchers[key]
        return len(ops) - len(keep)
