"""Kafka's request purgatory: operations that wait for a condition or a deadline.

Why
---
A Kafka broker cannot answer every request at once.  A produce with
``acks=all`` must wait until every in-sync follower has copied the records; a
fetch with ``min.bytes`` must wait until enough bytes exist.  Each such request
is parked in a *purgatory* until either its condition holds (an *event* on one
of its keys, say a follower fetch on its partition, makes it completable) or
its timeout passes.  Tens of thousands are parked at once and most complete
early, so the purgatory needs three cheap things:

* completing an operation removes its timeout at once: the operation *is* its
  :class:`~tickwheel.TimerTask`, and ``cancel()`` unlinks it from its wheel
  bucket in O(1) (a heap would keep it until its deadline, which is how Kafka's
  first purgatory ran out of memory);
* an event on a key reaches only the operations watching that key: watcher
  lists are kept per key, in shards with one lock each, so threads working on
  different keys rarely meet;
* stale entries (operations already completed through another key) cost
  little: they are dropped when their key is checked, and all lists are swept
  when the number of completed-but-still-watched operations, estimated as
  *operations watched since the last sweep* minus *operations still in the
  timer*, exceeds ``purge_interval``.

Exactly once.  ``on_complete`` runs once per operation, whichever path wins:
``try_complete`` (via :meth:`DelayedOperationPurgatory.try_complete_else_watch`
or :meth:`~DelayedOperationPurgatory.check_and_complete`),
:meth:`DelayedOperation.force_complete`, or the timer (then ``on_expiration``
follows).  All of them run under the operation's lock, so ``on_complete``
never overlaps ``try_complete`` of the same operation.

No lost wake-up.  :meth:`~DelayedOperationPurgatory.try_complete_else_watch`
holds the operation's lock while it tries, watches under every key, and tries
again.  An event that changes the state *before* the watch is seen by the
second try; an event *after* it finds the operation in the key's list.

Worked example (a deterministic purgatory on a :class:`~tickwheel.MockTimer`):
an operation that completes once a shared counter reaches 3, with a 50 ms
timeout.

>>> from tickwheel import MockTimer
>>> state = {"acks": 0}
>>> class WaitForAcks(DelayedOperation):
...     def try_complete(self):
...         return state["acks"] >= 3 and self.force_complete()
...     def on_complete(self):
...         print("complete at", timer.now_ms, "expired" if self.expired else "in time")
>>> timer = MockTimer()
>>> purgatory = DelayedOperationPurgatory("acks", timer)
>>> op = WaitForAcks(50)
>>> purgatory.try_complete_else_watch(op, ["topic-0", "topic-1"])
False
>>> purgatory.watched, purgatory.delayed
(2, 1)
>>> timer.advance_clock(10); state["acks"] = 3
False
>>> purgatory.check_and_complete("topic-1")
complete at 10 in time
1
>>> purgatory.watched, purgatory.delayed   # 'topic-0' still holds a stale entry
(1, 0)
>>> late = WaitForAcks(5); state["acks"] = 0
>>> purgatory.try_complete_else_watch(late, ["topic-0"])
False
>>> timer.advance_clock(5)
complete at 15 expired
True

Threads.  With ``timer=None`` the purgatory owns a :class:`~tickwheel.SystemTimer`
whose reaper thread expires operations and whose worker thread runs
``on_complete``/``on_expiration`` for them; ``shutdown()`` closes it.  With
``reaper=False`` no reaper is started and the caller drives expiry with
:meth:`DelayedOperationPurgatory.advance_clock` (Kafka's ``advanceClock``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Iterable
from threading import get_ident
from typing import TYPE_CHECKING, Any, TypeVar

from . import _wheel_py
from ._impl import USE_EXTENSIONS, TimerCore, TimerTask
from .timer import SystemTimer

# The compiled hot paths (_purgatory.pyx) come with the compiled core; this
# module is their pure-Python reference and the fallback, as _wheel_py is
# _wheel's (TICKWHEEL_NO_EXTENSIONS=1 selects it).
_compiled: Any = None
if not TYPE_CHECKING and USE_EXTENSIONS:
    try:
        from . import _purgatory as _compiled
    except ImportError as exc:  # pragma: no cover - a broken or partial build
        # The two extensions are built together; one without the other (or
        # one built against another _wheel.pxd) is a build to fix, not a
        # mode to run in quietly.
        import warnings

        warnings.warn(
            f"tickwheel: the compiled core loaded but its compiled purgatory did "
            f"not ({exc}); the purgatory runs in pure Python. Rebuild tickwheel.",
            RuntimeWarning,
            stacklevel=2,
        )
        _compiled = None
#: True when DelayedOperation and the purgatory's hot paths are compiled.
USE_COMPILED_PURGATORY = _compiled is not None

__all__ = [
    "DEFAULT_PURGE_INTERVAL",
    "DEFAULT_SHARDS",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "PyDelayedOperation",
]

logger = logging.getLogger("tickwheel")

#: Kafka's ``*.purgatory.purge.interval.requests`` default.
DEFAULT_PURGE_INTERVAL = 1000
#: Number of watcher-list shards (a power of two); Kafka uses 512 on the JVM.
DEFAULT_SHARDS = 64

if TYPE_CHECKING:
    _Base = TimerTask
else:
    _Base = object


class _DelayedOperationMixin(_Base):
    """The logic of DelayedOperation, shared by both core implementations.

    State lives in slots named ``_op_*`` so they never collide with the
    core's own fields.  ``_op_done`` is the one flag hot loops read: it turns
    True, under the operation's lock, when the operation completes or is
    withdrawn by :meth:`DelayedOperationPurgatory.cancel_for_key`.
    ``_op_holder`` is the id of the thread that holds the lock on the
    operation's behalf, so that ``force_complete`` called from inside
    ``try_complete`` does not try to take a plain ``Lock`` a second time.

    ``_op_retry`` is Kafka's ``tryCompletePending``: a thread that wants to
    try the operation but finds its lock taken sets it, and the thread that
    holds the lock tries again after releasing it (see
    :meth:`DelayedOperationPurgatory.check_and_complete`).  That hand-off is
    only sound when every holder of the lock is a purgatory path that looks
    at the flag, i.e. for the operation's own private lock; ``_op_trylock``
    is False for a lock passed in (shared) or handed out by :attr:`lock`,
    and then threads wait for the lock instead.
    """

    if TYPE_CHECKING:
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
    else:
        __slots__ = ()  # the concrete classes own the slots (one layout per core)

    _op_lock: Any
    _op_holder: int
    _op_done: bool
    _op_withdrawn: bool
    _op_expired: bool
    _op_submitted: bool
    _op_retry: bool
    _op_trylock: bool

    def __init__(self, delay_ms: int | float, lock: Any = None) -> None:
        # The concrete classes below inline this (one call less per operation).
        super().__init__(delay_ms)
        self._op_setup(lock)

    def _op_setup(self, lock: Any) -> None:
        if lock is None:
            self._op_lock = _new_lock()
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
            self.cancel()
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
        self.cancel()  # the TimerTask entry: O(1) unlink
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
        self.cancel()
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
        if self._op_withdrawn:
            state = "withdrawn"
        elif self._op_expired:
            state = "expired"
        elif self._op_done:
            state = "completed"
        else:
            state = "open"
        return f"<{type(self).__name__} delay_ms={self.delay_ms!r} {state}>"


_OP_SLOTS = (
    "_op_lock",
    "_op_holder",
    "_op_done",
    "_op_withdrawn",
    "_op_expired",
    "_op_submitted",
    "_op_retry",
    "_op_trylock",
)

_new_lock = threading.Lock


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


class DelayedOperation(_DelayedOperationMixin, TimerTask):
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

    __slots__ = _OP_SLOTS

    def __init__(self, delay_ms: int | float, lock: Any = None) -> None:
        # _DelayedOperationMixin.__init__, inlined: creating operations is
        # on the purgatory's hot path (one per request).
        _task_init(self, delay_ms)
        if lock is None:
            self._op_lock = _new_lock()
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


_task_init = TimerTask.__init__
# The pure class, kept for the twin-parity test when the compiled one replaces it.
_PureDelayedOperation = DelayedOperation

_Op = TypeVar("_Op", bound="_DelayedOperationMixin")


def _new_operation(cls: type[_Op], delay_ms: int | float) -> _Op:
    """A new ``cls`` with ``delay_ms`` and a private lock, without calling its __init__.

    For DelayedOperation subclasses created by the million that fill their
    own fields right after (the replay engine's one operation per request):
    the state is what ``DelayedOperation.__init__(op, delay_ms)`` leaves.

    :raises TypeError: if ``cls`` is not a DelayedOperation subclass, or as
        DelayedOperation for ``delay_ms``
    """
    if not (isinstance(cls, type) and issubclass(cls, _PureDelayedOperation)):
        raise TypeError(f"cls must be a DelayedOperation subclass, got {cls!r}")
    op = cls.__new__(cls)
    _PureDelayedOperation.__init__(op, delay_ms)
    return op


# Kept for the tests when the compiled one replaces it.
_pure_new_operation = _new_operation

if not TYPE_CHECKING and _compiled is not None:
    # The same class, compiled: C fields instead of slots (see _purgatory.pxd).
    DelayedOperation = _compiled.DelayedOperation
    _new_operation = _compiled._new_operation  # noqa: F811


class PyDelayedOperation(_DelayedOperationMixin, _wheel_py.TimerTask):
    """DelayedOperation on the pure-Python core (for PyMockTimer/PySystemTimer)."""

    __slots__ = _OP_SLOTS


class _Shard:
    """A slice of the key space: key -> watcher list, and the lock writers take."""

    __slots__ = ("lock", "watchers")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watchers: dict[Hashable, list[_DelayedOperationMixin]] = {}


def _hash_key(key: object, what: str) -> int:
    try:
        return hash(key)
    except TypeError:
        raise TypeError(f"{what} must be hashable, got {key!r}") from None


def _hand_off(op: _DelayedOperationMixin) -> bool:
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
    _compiled_ops: bool

    if TYPE_CHECKING:

        def _check_op_type(self, operation: object) -> None: ...

        @staticmethod
        def _keys_tuple(keys: Iterable[Hashable]) -> tuple[Hashable, ...]: ...

        def _purge_if_due(self) -> None: ...

    def try_complete_else_watch(
        self, operation: _DelayedOperationMixin, keys: Iterable[Hashable]
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
        # Validate every key before registering anything; equal keys count once.
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
        shards = self._shards
        mask = self._mask
        ident = get_ident()
        lock = operation._op_lock
        completed = False
        error: BaseException | None = None
        lock.acquire()
        operation._op_holder = ident
        try:
            if operation.try_complete():
                return True
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
                operation.cancel()
        if self._estimated - len(self._timer) > self._purge_interval:
            self._purge_if_due()
        if error is not None:
            raise error
        return completed

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
        keep: list[_DelayedOperationMixin] = []
        keep_op = keep.append
        error: BaseException | None = None
        # Iterating while another thread appends is safe: an operation
        # appended after this read is re-tried by its own watcher (the
        # second try in try_complete_else_watch).  The live operations are
        # collected on the way, so compaction needs no second pass.
        for op in ops:
            if op._op_done:
                dropped += 1
                continue
            lock = op._op_lock
            if not op._op_trylock:
                lock.acquire()  # a shared lock: wait for it
            elif not lock.locked():
                # Free a moment ago (if another thread took it meanwhile,
                # this waits for it, which is merely slower).  acquire()
                # with no argument is the cheapest call the lock offers.
                lock.acquire()
            elif not _hand_off(op):
                keep_op(op)  # its holder tries again for us
                continue
            op._op_holder = ident
            try:
                ok = op.try_complete()
            except BaseException as exc:
                ok = False
                if error is None:
                    error = exc
                else:
                    self._log_error(op, exc)
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
                    if error is None:
                        error = exc
                    else:
                        self._log_error(op, exc)
                if not ok and op._op_done:
                    dropped += 1  # completed by another thread meanwhile
                    continue
            if ok:
                completed += 1
                dropped += 1
            else:
                keep_op(op)
        if dropped:
            self._replace(shard, key, ops, keep, len(keep) + dropped)
        if error is not None:
            raise error
        return completed

    @staticmethod
    def _retry(op: _DelayedOperationMixin, ident: int) -> bool:
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

    def _log_error(self, op: _DelayedOperationMixin, exc: BaseException) -> None:
        logger.error(
            "purgatory %r: try_complete of %r raised", self._name, op, exc_info=exc
        )

    @staticmethod
    def _replace(
        shard: _Shard,
        key: Hashable,
        scanned: list[_DelayedOperationMixin],
        keep: list[_DelayedOperationMixin],
        seen: int,
    ) -> None:
        # Install the live operations a scan collected from ``scanned`` (its
        # first ``seen`` entries) plus whatever was appended after the scan.
        # Lists are replaced, never edited, so a concurrent scan of the old
        # list never skips an entry.
        with shard.lock:
            watchers = shard.watchers
            ops = watchers.get(key)
            if ops is None:
                return
            if ops is scanned:
                if len(ops) > seen:
                    keep.extend(ops[seen:])
            else:  # replaced meanwhile (another scan or a purge): filter it
                keep = [op for op in ops if not op._op_done]
                if len(keep) == len(ops):
                    return
            if keep:
                watchers[key] = keep
            else:
                del watchers[key]


if TYPE_CHECKING or _compiled is None:
    _CoreBase = _PurgatoryCore
else:
    _Shard = _compiled._Shard
    _CoreBase = _compiled._PurgatoryCore


class DelayedOperationPurgatory(_CoreBase):
    """Watch delayed operations by key; complete them on events or at their timeout.

    Runtime complexity: try_complete_else_watch O(keys + levels);
    check_and_complete O(operations watching the key); completion O(1).

    >>> from tickwheel import MockTimer
    >>> class Ready(DelayedOperation):
    ...     ready = False
    ...     def try_complete(self):
    ...         return self.ready and self.force_complete()
    >>> with DelayedOperationPurgatory("demo", MockTimer()) as p:
    ...     op = Ready(1000)
    ...     p.try_complete_else_watch(op, ["k"]), p.check_and_complete("k")
    ...     op.ready = True
    ...     p.check_and_complete("k"), op.completed, p.watched, p.delayed
    (False, 0)
    (1, True, 0, 0)

    :param name: the purgatory's name (Kafka: "Produce", "Fetch"); names the
        owned timer's threads ``purgatory-<name>-reaper`` / ``-executor``
    :param timer: a SystemTimer or MockTimer used only by this purgatory, or
        None to own a new SystemTimer (closed by :meth:`shutdown`)
    :param purge_interval: sweep all watcher lists when more than this many
        completed operations are estimated to be still watched
    :param reaper: for an owned timer, start its reaper thread; False means the
        caller drives expiry with :meth:`advance_clock`.  With a given
        ``timer`` the purgatory starts no thread either way (that timer's own
        settings apply); pass False, as Kafka's tests do with a mock timer,
        to say that the caller drives it
    :param shards: number of watcher-list shards, a power of two
    :raises TypeError: for a non-str name, a non-timer ``timer``, a non-bool
        ``reaper`` or a non-int interval
    :raises ValueError: for an empty name, a negative interval, or a shard
        count that is not a power of two
    """

    def __init__(
        self,
        name: str,
        timer: TimerCore | None = None,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        reaper: bool = True,
        *,
        shards: int = DEFAULT_SHARDS,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {name!r}")
        if not name:
            raise ValueError(f"name must not be empty, got {name!r}")
        if isinstance(purge_interval, bool) or not isinstance(purge_interval, int):
            raise TypeError(f"purge_interval must be an int, got {purge_interval!r}")
        if purge_interval < 0:
            raise ValueError(f"purge_interval must be >= 0, got {purge_interval!r}")
        if not isinstance(reaper, bool):
            raise TypeError(f"reaper must be a bool, got {reaper!r}")
        if isinstance(shards, bool) or not isinstance(shards, int):
            raise TypeError(f"shards must be an int, got {shards!r}")
        if shards < 1 or shards & (shards - 1):
            raise ValueError(f"shards must be a power of two >= 1, got {shards!r}")
        if timer is None:
            timer = SystemTimer(name=f"purgatory-{name}", reaper=reaper)
            self._owns_timer = True
        else:
            if not isinstance(timer, (TimerCore, _wheel_py.TimerCore)):
                raise TypeError(
                    f"timer must be a SystemTimer or MockTimer (or None), got {timer!r}"
                )
            # A given timer runs as it was built; the purgatory starts no
            # thread for it whatever ``reaper`` says.  reaper=False is how
            # Kafka's tests build theirs (a mock timer, the caller driving
            # it with advance_clock), so it is accepted, not refused.
            self._owns_timer = False
        # The operations this timer accepts: the TimerTask of the same core.
        self._task_type: type = (
            _wheel_py.TimerTask if isinstance(timer, _wheel_py.TimerCore) else TimerTask
        )
        # Compiled hot paths read the operations' C fields (compiled core only).
        self._compiled_ops = _compiled is not None and self._task_type is TimerTask
        self._name = name
        self._timer = timer
        self._purge_interval = purge_interval
        self._shards = [_Shard() for _ in range(shards)]
        self._mask = shards - 1
        # Operations watched since the last purge (Kafka's estimatedTotalOperations).
        # Updated without a lock: a lost increment only delays a purge a little.
        self._estimated = 0
        self._purge_lock = threading.Lock()
        self._shut = False
        # Operation types already checked by try_complete_else_watch.
        self._op_types = set()

    # -- properties -----------------------------------------------------------
    @property
    def name(self) -> str:
        """The purgatory's name."""
        return self._name

    @property
    def timer(self) -> Any:
        """The timer that holds the pending operations."""
        return self._timer

    @property
    def purge_interval(self) -> int:
        """Completed-but-watched estimate above which all lists are swept."""
        return self._purge_interval

    @property
    def closed(self) -> bool:
        """True after shutdown()."""
        return self._shut

    @property
    def watched(self) -> int:
        """Entries in all watcher lists (an operation under k keys counts k).

        Runtime complexity: O(keys).
        """
        total = 0
        for shard in self._shards:
            with shard.lock:
                total += sum(map(len, shard.watchers.values()))
        return total

    @property
    def delayed(self) -> int:
        """Operations still in the timer (neither completed nor expired yet).

        This is ``len(timer)``, so the timer should serve this purgatory alone.
        """
        return len(self._timer)

    def keys(self) -> list[Hashable]:
        """The keys that currently have a watcher list."""
        out: list[Hashable] = []
        for shard in self._shards:
            with shard.lock:
                out.extend(shard.watchers)
        return out

    # -- the API ---------------------------------------------------------------
    def _check_op_type(self, operation: object) -> None:
        if self._compiled_ops:
            ok = isinstance(operation, _compiled.DelayedOperation)
        else:
            ok = isinstance(operation, _DelayedOperationMixin) and isinstance(
                operation, self._task_type
            )
        if not ok:
            raise TypeError(
                "operation must be a DelayedOperation on the same core as the "
                f"purgatory's timer, got {operation!r}"
            )
        self._op_types.add(type(operation))

    @staticmethod
    def _keys_tuple(keys: Iterable[Hashable]) -> tuple[Hashable, ...]:
        if isinstance(keys, (str, bytes)):
            raise TypeError(
                f"keys must be an iterable of keys, not a {type(keys).__name__} "
                f"(wrap a single key in a list), got {keys!r}"
            )
        try:
            return tuple(keys)
        except TypeError:
            raise TypeError(
                f"keys must be an iterable of hashable keys, got {keys!r}"
            ) from None

    def cancel_for_key(self, key: Hashable) -> list[_DelayedOperationMixin]:
        """Stop watching ``key``: withdraw its open operations without completing them.

        Each returned operation leaves the timer and is marked
        :attr:`~DelayedOperation.withdrawn`: no later event or timeout
        completes it, and its entries under other keys become stale.

        Runtime complexity: O(operations watching ``key``).

        :return: the operations this call withdrew (open ones watching ``key``)
        :raises TypeError: if ``key`` is unhashable
        """
        shard = self._shards[_hash_key(key, "key") & self._mask]
        with shard.lock:
            ops = shard.watchers.pop(key, None)
        if not ops:
            return []
        return [op for op in ops if op._withdraw()]

    def advance_clock(self, timeout_ms: int | float = 0) -> bool:
        """Drive the timer (for ``reaper=False`` or a MockTimer), then purge if due.

        Kafka's ``advanceClock``: on a SystemTimer, wait up to ``timeout_ms``
        for a timeout to fall due; on a MockTimer, move its clock by
        ``timeout_ms``.  Expired operations complete (on the timer's executor
        for a SystemTimer, inline for a MockTimer).

        :return: the timer's answer: on a SystemTimer, True iff a due bucket
            was processed (even if its operations only moved down a level, as
            in Kafka); on a MockTimer, True iff an operation expired
        """
        ran = bool(self._timer.advance_clock(timeout_ms))
        if self._estimated - len(self._timer) > self._purge_interval:
            self._purge_if_due()
        return ran

    def purge(self) -> int:
        """Drop every completed (or withdrawn) operation from every watcher list.

        Runs automatically when the estimate of completed-but-watched
        operations exceeds ``purge_interval``.

        Runtime complexity: O(watched).

        :return: how many entries were removed
        """
        self._estimated = len(self._timer)
        purged = 0
        for shard in self._shards:
            with shard.lock:
                watchers = shard.watchers
                for key, ops in list(watchers.items()):
                    keep = [op for op in ops if not op._op_done]
                    if len(keep) != len(ops):
                        purged += len(ops) - len(keep)
                        if keep:
                            watchers[key] = keep
                        else:
                            del watchers[key]
        return purged

    def _purge_if_due(self) -> None:
        # One purge at a time; a thread that finds one running moves on.
        if self._purge_lock.acquire(False):
            try:
                if self._estimated - len(self._timer) > self._purge_interval:
                    purged = self.purge()
                    logger.debug("purgatory %r: purged %d entries", self._name, purged)
            finally:
                self._purge_lock.release()

    # -- lifecycle ---------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop expiring operations and forget every watcher list; idempotent.

        An owned timer is closed (its threads stop at once and are joined).
        Pending operations are left neither completed nor expired: their
        timeouts are cancelled.  Later try_complete_else_watch calls raise.
        """
        if self._shut:
            return
        self._shut = True
        pending: list[_DelayedOperationMixin] = []
        for shard in self._shards:
            with shard.lock:
                for ops in shard.watchers.values():
                    pending.extend(op for op in ops if not op._op_done)
                shard.watchers.clear()
        if self._owns_timer:
            self._timer.close()
        else:
            for op in pending:
                op.cancel()

    def __enter__(self) -> DelayedOperationPurgatory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def _check(self) -> None:
        """Raise AssertionError unless the watcher lists are consistent."""
        for index, shard in enumerate(self._shards):
            with shard.lock:
                for key, ops in shard.watchers.items():
                    if hash(key) & self._mask != index:
                        raise AssertionError(f"key {key!r} in shard {index}")
                    if not ops:
                        raise AssertionError(f"empty watcher list for {key!r}")
                    if len({id(op) for op in ops}) != len(ops):
                        raise AssertionError(f"duplicate operation under {key!r}")
                    for op in ops:
                        if not op._op_submitted:
                            raise AssertionError(f"unsubmitted {op!r} under {key!r}")

    def __repr__(self) -> str:
        state = "shut down" if self._shut else "open"
        return (
            f"<DelayedOperationPurgatory {self._name!r} {state} "
            f"watched={self.watched} delayed={self.delayed}>"
        )
