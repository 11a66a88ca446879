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
import sys
import threading
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any

# The compiled purgatory (_purgatory.pyx) or its twin (_purgatory_py.py), as
# chosen once by _impl: DelayedOperation and the hot paths come from there.
from ._impl import (
    CountdownOperation,
    DelayedOperation,
    TimerCore,  # the base of MockTimer and SystemTimer
    _hash_key,
    _PurgatoryCore,
    _Shard,
)
from ._impl import (  # for spark/engine.py: operations created without __init__
    _new_operation as _new_operation,
)
from .timer import MockTimer, SystemTimer

if TYPE_CHECKING:  # typing.Self is 3.11+; mypy knows typing_extensions' copy
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

__all__ = [
    "DEFAULT_PURGE_INTERVAL",
    "DEFAULT_SHARDS",
    "CountdownOperation",
    "DelayedOperation",
    "DelayedOperationPurgatory",
]

logger = logging.getLogger("tickwheel")

#: Kafka's ``*.purgatory.purge.interval.requests`` default.
DEFAULT_PURGE_INTERVAL = 1000
#: Number of watcher-list shards (a power of two); Kafka uses 512 on the JVM.
DEFAULT_SHARDS = 64


class DelayedOperationPurgatory(_PurgatoryCore):
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
        timer: SystemTimer | MockTimer | None = None,
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
            if not isinstance(timer, TimerCore):
                raise TypeError(
                    f"timer must be a SystemTimer or MockTimer (or None), got {timer!r}"
                )
            # A given timer runs as it was built; the purgatory starts no
            # thread for it whatever ``reaper`` says.  reaper=False is how
            # Kafka's tests build theirs (a mock timer, the caller driving
            # it with advance_clock), so it is accepted, not refused.
            self._owns_timer = False
        self._name = name
        self._timer = timer
        # The compiled core adds to (and counts) a timer whose class keeps
        # TimerCore's add and __len__ in C, without the attribute lookups.
        cls = type(timer)
        self._c_timer = cls.add is TimerCore.add and cls.__len__ is TimerCore.__len__
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
        if not isinstance(operation, DelayedOperation):
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

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
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
        purged: int = self._purge_lists()
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
        pending: list[DelayedOperation] = []
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

    def __enter__(self) -> Self:
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
