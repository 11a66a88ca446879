"""SystemTimer and MockTimer: thin Python drivers over the timing-wheel core.

Kafka's ``SystemTimer`` pairs a hierarchical timing wheel with a reaper
thread that polls a ``DelayQueue`` of buckets every 200 ms and hands expired
tasks to a one-thread executor.  tickwheel keeps the shape and removes the
poll: the thread keeping time sleeps on a condition variable
(``threading.Condition.wait`` releases the GIL) exactly until the earliest
bucket is due, and :meth:`~tickwheel._wheel_py.TimerCore.add` wakes it at once
when a task lands in a bucket earlier than everything pending, or is already
due.  With the default executor that thread is the executor's worker itself
whenever it is idle, so a due bucket costs one thread wake-up, not two (a
reaper's, then the worker's); the reaper is then a backup that expires what
a long-running task has kept the worker from polling.  With ``"inline"`` or
a ``concurrent.futures.Executor`` the reaper keeps time and dispatches.

:class:`MockTimer` is the same wheel on a manual clock: no threads, tasks run
inside :meth:`MockTimer.advance_clock`, in deadline order, and ``now_ms``
reads each task's deadline while it runs (a discrete-event clock).  Tests and
event-time replay use it.

Example (manual clock)::

    >>> from tickwheel import MockTimer
    >>> timer = MockTimer()
    >>> fired = []
    >>> task = timer.schedule(10, fired.append, "ten")
    >>> timer.advance_clock(9), fired
    (False, [])
    >>> timer.advance_clock(1), fired, timer.now_ms
    (True, ['ten'], 10)

SystemTimer's threads: who waits on what, who wakes whom
--------------------------------------------------------
One lock and three conditions on it (``_cond``, ``_work_cond``,
``_reaper_cond``), so that each notify reaches only the thread it is for.
Every name in these tables is a name in this file, and
``tests/test_timer_roles.py`` checks the rows against the code: each loop
waits on the condition in its row, the notifies in the code are exactly the
"woken by" cells, and the functions that touch each piece of state are
exactly those in its row.

Who waits (one row per waiting thread; a thread waits on one condition only):

| role | loop | exists when | waits on | woken by |
|---|---|---|---|---|
| worker | `_work` | no executor | `_work_cond` | `_on_wake`, `_expire_due`, `_close` |
| reaper | `_reap` | reaper=True | `_reaper_cond` | `_on_wake`, `_close` |
| driver | `advance_clock` | any caller | `_cond` | `_on_wake`, `_close` |

- `_on_wake` (run by the core inside ``add`` when the task is due already
  or sits earlier than everything pending) wakes every driver, the worker iff
  `_worker_idle`, and the reaper iff `_reaper_parked` or the reaper keeps
  time (not `_worker_keeps_time`).  Threads calling ``add`` never wait.
- `_expire_due` wakes the worker after queueing a batch on `_batches`.
- `_close` sets `_stopping` and wakes everyone.
- The pool runners (`_run_one` per task, or `_fan_out`'s `_drain` runners
  sharing one deque when the pool has fewer threads than the bucket has
  tasks) run on the executor's threads and never wait on these conditions.

Who keeps time (polls due buckets: `_expire_due`, or the idle worker's
`_work` through the core's `_keep_time`), who runs the tasks:

| executor | reaper | keeps time | runs the tasks |
|---|---|---|---|
| None | True | `_work` when idle; `_reap` `_BACKUP_NS` late | `_work` |
| None | False | `advance_clock`; `_work` after a batch | `_work` |
| "inline" | either | `_reap` if running, else `advance_clock` | the poller |
| an Executor | either | `_reap` if running, else `advance_clock` | the pool |

The state they share besides the wheel (which serialises itself), with every
function that touches it after `_init_sync`:

| state | written by | read by | guarded by |
|---|---|---|---|
| `_stopping` | `_close` | `_work`, `_reap`, `advance_clock` | the lock |
| `_worker_idle` | `_work` | `_on_wake` | the lock |
| `_reaper_parked` | `_reap` | `_on_wake` | the lock |
| `_batches` | `_expire_due`, `_work`, `_close` | | the lock (+ `_handover`) |
| `_handover` | `_expire_due`, `_work`, `_close` | | itself |
| `_processed` | `_poll_counted`, `_keep_time` (the core's) | `advance_clock` | – |
| `_processed_seen` | `advance_clock` | | the driver |
| `_undone` | `_expire_due`, `_run_batch`, `_close` | `advance_clock` | see below |

- `_worker_idle`: the idle worker keeps time, so add() wakes it, not the
  reaper.  `_reaper_parked`: the backup reaper sleeps untimed while nothing
  is pending, so add() must wake it.
- `_handover` is held across poll + append to `_batches`, so batches reach
  the worker in deadline order whichever thread polled.  It is taken before
  the lock, never waited for while holding it: the idle worker, which polls
  under the lock (the core's `_keep_time`), only tries it.
- `_processed` counts due buckets processed by any thread (every poll counts
  in the core's `_poll_counted` or `_keep_time`), `_processed_seen`
  how many of them advance_clock has reported: a bucket another thread
  processed since the last call makes the next call return True, so Kafka's
  drain loop never stops with cascaded tasks pending.  Only ``!=`` between
  the two matters, so the unlocked increment is enough: a lost update merges
  two counts and the next call still returns True.
- `_undone`: the rest of a batch a KeyboardInterrupt cut short on the
  driver's thread ("inline"); the next poll, on either thread, runs it
  (``_run`` skips a task that already ran) and `_close` cancels it.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import math
import os
import sys
import sysconfig
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ._impl import (
    DEFAULT_TICK_MS,
    DEFAULT_WHEEL_SIZE,
    MAX_DELAY_MS,
    USE_EXTENSIONS,
    TimerCore,
    TimerTask,
    core,
)

if TYPE_CHECKING:  # typing.Self is 3.11+; mypy knows typing_extensions' copy
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

__all__ = ["MockTimer", "SystemTimer"]

logger = logging.getLogger("tickwheel")

_NS_PER_MS = 1_000_000
# A manual clock may not pass this (the cores' now_ns range), rounded to whole ms.
_CLOCK_END_NS = 2**62 // _NS_PER_MS * _NS_PER_MS

ErrorHandler = Callable[[TimerTask, BaseException], Any]


def _log_error(task: Any, exc: BaseException) -> None:
    """Default error handler: log the exception with its traceback."""
    logger.error("tickwheel task %r raised", task, exc_info=exc)


def _check_ms(value: object, name: str) -> int:
    """Validate a non-negative duration in ms and return it in nanoseconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of milliseconds, got {value!r}")
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    if value > MAX_DELAY_MS:
        raise OverflowError(f"{name}={value!r} is out of range")
    if isinstance(value, int):
        return value * _NS_PER_MS
    return math.ceil(value * _NS_PER_MS)


# Idle-time cascading by the thread keeping time (see TimerCore.precascade):
# tasks looked at per call (about 10 us compiled), and the least idle time
# worth using.
_CASCADE_CHUNK = 256
_CASCADE_IDLE_NS = 100_000

# With the default executor the worker polls each bucket as it falls due; the
# reaper expires only what has been due this long, which happens when a long
# task keeps the worker busy (it would run those tasks later anyway).
_BACKUP_NS = 20 * _NS_PER_MS

# Every open SystemTimer, for the fork and exit hooks below.
_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


def _default_lanes() -> int:
    """How many lanes a SystemTimer has (``TimerCore._use_lanes``).

    On a free-threaded build with the compiled core, one per CPU, at most 8:
    threads scheduling and cancelling on one timer then share no lock
    (docs/freethreading.md).  Otherwise one: with a GIL one thread runs at a
    time, and lanes would only add work to every poll.
    """
    if not USE_EXTENSIONS or not sysconfig.get_config_var("Py_GIL_DISABLED"):
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


#: Lanes of each new SystemTimer (tests set it to exercise lanes anywhere).
_LANES = _default_lanes()


def _after_fork_in_child() -> None:
    # Threads do not survive fork(); a lock held by one of them in the parent
    # stays held forever in the child.  Give every timer fresh locks and
    # threads.  Tasks pending at the fork belong to the parent and, as with
    # threading.Timer, do not run in the child: they are cancelled there.
    if not USE_EXTENSIONS:
        core._renew_lock()  # the twin's one lock
    for timer in list(_LIVE):
        timer._reinit_after_fork()


def _close_all_at_exit() -> None:
    # Pending timers must not make the interpreter hang or spray tracebacks
    # from daemon threads during finalization: close them, bounded.
    for timer in list(_LIVE):
        timer._close(join_timeout=1.0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)


class SystemTimer(TimerCore):
    """A real-time hierarchical timing wheel with its own reaper thread.

    Expired tasks run on the executor: by default one named worker thread,
    which, while idle, sleeps (GIL released) until the earliest bucket is due
    and then polls and runs it itself, the reaper standing by for buckets a
    long task keeps it from; ``executor="inline"`` runs them on the reaper
    thread, which keeps time; any :class:`concurrent.futures.Executor` works.
    A task that raises is passed to ``on_error`` (default: logged on the
    ``tickwheel`` logger) and never stops either thread.  Tasks never run
    before their deadline.

    Runtime complexity: add/schedule O(levels), cancel O(1).

    >>> import threading
    >>> done = threading.Event()
    >>> with SystemTimer() as timer:
    ...     task = timer.schedule(5, done.set)
    ...     done.wait(5)
    True

    :param name: prefix of the thread names
    :param tick_ms: resolution in milliseconds (>= 1)
    :param wheel_size: buckets per wheel level (>= 2)
    :param start_ms: wheel start on the clock, in ms (default: now)
    :param executor: None, "inline", or a concurrent.futures.Executor
    :param reaper: start the reaper thread (False: call advance_clock yourself)
    :param clock: callable returning nanoseconds (default time.monotonic_ns)
    :param on_error: ``on_error(task, exc)`` for exceptions raised by tasks
    :param cascade_early: let the thread keeping time move tasks of big
        overflow buckets down a level while it is idle, in chunks (see
        ``precascade``), instead of all at once when the bucket's slot starts
    """

    # Set by _init_sync (the module header's tables give each one's role).
    _cond: threading.Condition
    _reaper_cond: threading.Condition
    _work_cond: threading.Condition
    _handover: threading.Lock
    _batches: deque[list[TimerTask]]
    _worker_idle: bool
    _reaper_parked: bool
    _processed: int
    _processed_seen: int

    def __init__(
        self,
        name: str = "tickwheel",
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        start_ms: int | None = None,
        executor: concurrent.futures.Executor | Literal["inline"] | None = None,
        reaper: bool = True,
        *,
        clock: Callable[[], int] | None = None,
        on_error: ErrorHandler | None = None,
        cascade_early: bool = True,
    ) -> None:
        _check_system_args(name, executor, on_error, cascade_early)
        super().__init__(tick_ms, wheel_size, start_ms, clock)
        if _LANES > 1:
            self._use_lanes(_LANES)
        self.name = name
        self._cascade_early = cascade_early
        self._on_error: ErrorHandler = on_error if on_error is not None else _log_error
        self._executor = executor
        self._use_reaper = bool(reaper)
        # With the default executor and a reaper, the worker keeps time
        # itself whenever it is idle (see _work) and the reaper is a backup.
        self._worker_keeps_time = executor is None and self._use_reaper
        _init_sync(self)
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._reaper: threading.Thread | None = None
        # Due tasks a BaseException (Ctrl-C) cut short on the advance_clock
        # caller's thread: still expired and counted, run by the next call.
        self._undone: list[TimerTask] = []
        _start_threads(self)
        _LIVE.add(self)

    def _reinit_after_fork(self) -> None:
        old = self._batches
        _init_sync(self)
        if self._stopping:
            self._reaper = self._worker = None
            return
        self.cancel_all()
        for batch in old:
            for task in batch:
                task.cancel()
        _start_threads(self)

    # -- waking and waiting -------------------------------------------------
    def _on_wake(self) -> None:
        # Called by the core after an add that needs attention: a task is
        # due already or sits in a bucket earlier than everything pending.
        # Only the thread keeping time must hear of it (and advance_clock's
        # callers, if any): the worker while it is idle, else the reaper.
        with self._cond:
            self._cond.notify_all()
            if self._worker_idle:
                self._work_cond.notify()
            if self._reaper_parked or not self._worker_keeps_time:
                self._reaper_cond.notify()

    def _reap(self) -> None:
        cond = self._reaper_cond
        while True:
            with cond:
                idle_work = True
                while True:
                    if self._stopping:
                        return
                    due_in = _due_in_ns(self)
                    if self._worker_keeps_time:
                        # The backup: the worker polls each bucket when it is
                        # due unless a long task keeps it busy; what has been
                        # due _BACKUP_NS is expired here, so len() and the
                        # wheel stay current meanwhile.  Wakes once per
                        # bucket at most, well after the worker has run it.
                        if due_in is not None and due_in <= -_BACKUP_NS:
                            break
                        self._reaper_parked = due_in is None
                        if due_in is not None:
                            due_in += _BACKUP_NS
                        cond.wait(None if due_in is None else due_in / 1e9)
                        self._reaper_parked = False
                        continue
                    if due_in is not None and due_in <= 0:
                        break
                    if idle_work and _idle_for_cascade(self, due_in):
                        # Idle until the next bucket: move a chunk of the next
                        # big overflow bucket down now (see precascade).
                        idle_work = _cascade_chunk(self)
                        # Re-read the queue: time passed, and after a full
                        # chunk the lock was let go (an add() may have
                        # notified meanwhile).
                        continue
                    self._sleep(cond, due_in)
                    idle_work = True
            try:
                self._expire_due()
            except BaseException:  # the reaper must survive anything
                logger.exception("tickwheel reaper %r: error while expiring", self.name)

    def _sleep(self, cond: threading.Condition, due_in: int | None) -> None:
        """Wait on ``cond`` (GIL released; add() and close() notify) until the
        next bucket is due, or early cascading has work again (an overflow
        bucket's slot comes within reach), or that work would wait for the
        slot to start and be done all at once."""
        at_ms = self.next_precascade_ms if self._cascade_early else None
        if at_ms is not None:
            until = at_ms * _NS_PER_MS - self.now_ns
            due_in = until if due_in is None else min(due_in, until)
        cond.wait(None if due_in is None else due_in / 1e9)

    def _expire_due(self, reraise: bool = False) -> bool:
        if self._executor is None:
            # The worker's queue: append each batch while still holding the
            # lock under which it was polled (the reaper, advance_clock's
            # caller and the worker itself all poll), so batches stay in
            # order.  Nothing is ever left in _undone on this path.
            with self._handover:
                batch = core._poll_counted(self)
                if batch:
                    with self._cond:
                        self._batches.append(batch)
                        self._work_cond.notify()
            return bool(batch)
        batch = core._poll_counted(self)
        if self._undone:
            batch = self._undone + batch
            self._undone = []
        if batch:
            self._dispatch(batch, reraise)
            return True
        return False

    # -- running expired tasks -----------------------------------------------
    def _dispatch(self, batch: list[TimerTask], reraise: bool = False) -> None:
        executor = self._executor
        if executor == "inline":
            self._run_batch(batch, reraise)
            return
        assert isinstance(executor, concurrent.futures.Executor)
        _submit(self, executor, batch)

    def _run_batch(self, batch: list[TimerTask], reraise: bool = False) -> None:
        while True:
            if self.closed:
                for task in batch:
                    task.cancel()
                return
            try:
                self._run(batch, self._on_error)
                return
            except BaseException:
                if reraise:
                    # On the thread driving advance_clock a KeyboardInterrupt
                    # must reach the caller (it used to be logged and lost).
                    # The rest of the batch stays expired: the next call runs
                    # it (_run skips what already ran), close() cancels it.
                    self._undone = batch + self._undone
                    raise
                # A task raised SystemExit/KeyboardInterrupt-like exceptions;
                # the rest of the batch is still expired, so loop and go on.
                logger.exception("tickwheel timer %r: task aborted", self.name)

    def _work(self) -> None:
        """The default executor's worker: runs the batches, in order.

        With a reaper it also keeps time whenever it is idle: it sleeps until
        the next bucket is due, polls it and runs it, with no other thread
        involved.  Handing each batch from a reaper to it would put two
        thread wake-ups (the reaper's, then the worker's, which must also
        take the GIL from the reaper) on every task's path instead of one.
        Without a reaper it polls only after a batch, what came due while
        that ran (nobody else would until the next advance_clock).  Either
        way it cascades early while it has nothing else to do.

        Its idle turn is one call to the core's ``_keep_time``, compiled: a
        wake-up of the worker is mostly that call, on caches gone cold while
        it slept (bench/README.md, "The purgatory, Kafka's workload").  It
        polls under the lock, kept (no hand-over through `_batches`, none
        being queued, and no notify to itself) and only tries `_handover`
        there; else it cascades a chunk early, else it says how long to sleep.
        """
        cond = self._work_cond
        batches = self._batches
        keeps_time = self._worker_keeps_time
        keep_time = core._keep_time
        look = keeps_time  # poll and cascade early now?
        while True:
            with cond:
                self._worker_idle = keeps_time
                while True:
                    if self._stopping:
                        self._worker_idle = False
                        return
                    if batches:
                        batch = batches.popleft()
                        break
                    if not look:
                        cond.wait()
                        look = keeps_time
                        continue
                    chunk = _CASCADE_CHUNK if self._cascade_early else 0
                    try:
                        turn = keep_time(self, self._handover, chunk, _CASCADE_IDLE_NS)
                    except BaseException:  # the worker must survive anything
                        self._turn_failed(chunk)
                        continue
                    if isinstance(turn, list):  # polled: run it (if any)
                        if turn:
                            batch = turn
                            break
                    elif turn is False:  # the reaper polls: poll after it
                        with _LetGo(cond):
                            self._expire_due()  # appends to _batches
                    elif turn == 0:  # a whole chunk cascaded: yield, go on
                        with _LetGo(cond):
                            time.sleep(0)
                    elif not keeps_time:
                        look = False
                    else:  # sleep until due (None: until woken)
                        cond.wait(None if turn is None else turn / 1e9)
                self._worker_idle = False
            self._run_batch(batch)
            look = True

    def _turn_failed(self, chunk: int) -> None:
        """Log an error raised by the idle worker's turn with the lock let go
        (a logging handler may add to this timer)."""
        if chunk and not self._cascade_early:  # the core turned it off
            message = "tickwheel timer %r: early cascade disabled"
        else:
            message = "tickwheel worker %r: error while expiring"
        with _LetGo(self._work_cond):
            logger.exception(message, self.name)

    # -- public API -----------------------------------------------------------
    def advance_clock(self, timeout_ms: int | float = 0) -> bool:
        """Wait up to ``timeout_ms`` for a bucket to be due, then expire what is due.

        Kafka's ``advanceClock``: for ``reaper=False`` timers driven by the
        caller (it is also safe alongside the reaper).

        With ``executor="inline"`` the due tasks run on the calling thread,
        and a ``KeyboardInterrupt`` (or other non-``Exception``) raised by one
        propagates to the caller; the tasks of that batch that had not run yet
        stay due and run on the next call (``close()`` cancels them).

        Like Kafka's, it returns True whenever a bucket was due and has been
        processed, even if its tasks only moved down a level (a cascade) and
        none ran yet, so Kafka's drain loop ``while timer.advance_clock(2000):
        pass`` runs every task.  (:meth:`MockTimer.advance_clock` differs: it
        moves the clock through every due bucket, and says whether a task ran.)

        :return: True iff a bucket was due (or tasks were left by an
            interrupted call) and has been processed, by this call or by the
            timer's own threads since the previous call; False if the wait
            ran out, or the timer closed, first
        :raises ValueError: if ``timeout_ms`` is negative or not finite
        """
        wait_ns = _check_ms(timeout_ms, "timeout_ms")
        deadline = self.now_ns + wait_ns
        with self._cond:
            while not self._undone:
                due_in = _due_in_ns(self)
                if due_in is not None and due_in <= 0:
                    break
                if self._processed != self._processed_seen:
                    # The worker (or the reaper) processed a due bucket since
                    # the last call: processed, so True, or a drain loop would
                    # stop with that bucket's cascaded tasks still pending.
                    self._processed_seen = self._processed
                    return True
                left = deadline - self.now_ns
                if left <= 0 or self._stopping:
                    return False
                if due_in is not None:
                    left = min(left, due_in)
                self._cond.wait(left / 1e9)
        # A bucket is due: the poll below processes it, or another thread
        # (the reaper, the worker) polled it a moment ago.  Either way it was
        # processed, so True, as Kafka's advanceClock after a cascade-only
        # bucket: returning False there ended drain loops with tasks pending.
        self._expire_due(reraise=True)
        self._processed_seen = self._processed
        return True

    @property
    def threads(self) -> list[threading.Thread]:
        """The threads this timer started (reaper, executor worker)."""
        return [t for t in (self._reaper, self._worker) if t is not None]

    def close(self) -> None:
        """Stop the reaper and worker, cancel every pending task; idempotent.

        Returns promptly (no poll interval); a task running right now is
        allowed to finish.  Safe to call from a task running on this timer.
        """
        self._close(join_timeout=None)

    def _close(self, join_timeout: float | None) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._reaper_cond.notify_all()
            self._work_cond.notify_all()
        self._close_core()  # cancels the tasks still in the wheel
        # Batches polled but not yet run: nothing appends after this (a poll
        # holds _handover until its batch is queued, and the wheel is empty).
        with self._handover, self._cond:
            undone = [task for batch in self._batches for task in batch]
            self._batches.clear()
        undone += self._undone
        self._undone = []
        for task in undone:
            task.cancel()
        _LIVE.discard(self)
        current = threading.current_thread()
        for thread in self.threads:
            if thread is not current and thread.is_alive():
                thread.join(join_timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<SystemTimer {self.name!r} {state} pending={len(self)}>"


# -- SystemTimer's helpers: setup, waiting, dispatch to a pool ----------------
def _check_system_args(
    name: object, executor: object, on_error: object, cascade_early: object
) -> None:
    """SystemTimer's argument checks, each naming the argument."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if on_error is not None and not callable(on_error):
        raise TypeError(f"on_error must be callable, got {on_error!r}")
    if not (
        executor is None
        or executor == "inline"
        or isinstance(executor, concurrent.futures.Executor)
    ):
        raise TypeError(
            "executor must be None, 'inline' or a concurrent.futures.Executor, "
            f"got {executor!r}"
        )
    if not isinstance(cascade_early, bool):
        raise TypeError(f"cascade_early must be a bool, got {cascade_early!r}")


def _init_sync(timer: SystemTimer) -> None:
    lock = threading.Lock()
    # Three conditions on one lock, so each wake-up reaches only the
    # thread it is for: advance_clock's callers wait on _cond, the reaper
    # on _reaper_cond, the executor's worker on _work_cond.  The tables
    # in the module header give every role and flag below.
    timer._cond = threading.Condition(lock)
    timer._reaper_cond = threading.Condition(lock)
    timer._work_cond = threading.Condition(lock)
    # Held across poll + hand-over to the worker, so batches reach it in
    # deadline order whichever thread polled (see _expire_due).
    timer._handover = threading.Lock()
    # Batches for the default executor's worker, in deadline order.
    timer._batches = deque()
    # The worker is idle and keeping time: add() wakes it, not the reaper.
    timer._worker_idle = False
    # The reaper sleeps with nothing pending, untimed: add() wakes it.
    timer._reaper_parked = False
    # Due buckets processed by any thread, and how many advance_clock has
    # reported: a bucket the worker polled between two advance_clock calls
    # still counts as processed for the caller's drain loop.
    timer._processed = 0
    timer._processed_seen = 0


def _start_threads(timer: SystemTimer) -> None:
    if timer._executor is None:
        timer._worker = threading.Thread(
            target=timer._work, name=f"{timer.name}-executor", daemon=True
        )
        timer._worker.start()
    if timer._use_reaper:
        timer._reaper = threading.Thread(
            target=timer._reap, name=f"{timer.name}-reaper", daemon=True
        )
        timer._reaper.start()


def _due_in_ns(timer: SystemTimer) -> int | None:
    """Nanoseconds until the next bucket is due (<= 0: due now), or None."""
    nxt = timer.next_expiration_ms
    if nxt is None:
        return None
    return int(nxt * _NS_PER_MS - timer.now_ns)


def _idle_for_cascade(timer: SystemTimer, due_in: int | None) -> bool:
    """Early cascading is on and no bucket is due for a while."""
    return timer._cascade_early and due_in is not None and due_in >= _CASCADE_IDLE_NS


def _cascade_chunk(timer: SystemTimer) -> bool:
    """One chunk of early cascading; True iff more may follow.

    Called with the timer's lock held (by the reaper, or the idle worker), and
    kept for the chunk, about 10 µs compiled: under a GIL no other
    thread runs meanwhile anyway, and an add() that must wake this
    thread waits no longer than that.  After a full chunk (the pass goes
    on) the lock and the GIL are yielded: without that, this thread
    keeps the GIL until the interpreter's switch interval (5 ms) forces
    it out, and a thread woken meanwhile (the one that runs due tasks,
    or one calling add) waits that long.
    """
    try:
        more = core._precascade_chunk(timer, _CASCADE_CHUNK)
    except BaseException:
        with _LetGo(timer._cond):  # (a logging handler may add to this timer)
            logger.exception("tickwheel timer %r: early cascade disabled", timer.name)
        return False
    if more:
        with _LetGo(timer._cond):
            time.sleep(0)
    return more


class _LetGo:
    """``with _LetGo(lock):`` a held lock let go for the block, taken back after."""

    __slots__ = ("_lock",)

    def __init__(self, lock: threading.Condition) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        self._lock.release()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.acquire()


def _submit(
    timer: SystemTimer, executor: concurrent.futures.Executor, batch: list[TimerTask]
) -> None:
    """SystemTimer._dispatch to a concurrent.futures.Executor."""
    # The tasks of one bucket run side by side, as with Kafka's one
    # submit per task, so a callback that blocks holds up only its own
    # pool thread.  (Submitting the bucket as one job ran its tasks one
    # after another on a single pool thread.)  A pool with fewer threads
    # than the bucket has tasks gets one runner per thread instead, all
    # taking the bucket's tasks in turn from one queue: the tasks start
    # when one submit each would start them, for a fraction of the cost
    # (a submit is ~5 us; see bench/measure.py dispatch).  The default
    # worker and "inline" keep the batch: one thread runs it either way.
    workers = getattr(executor, "_max_workers", None)  # ThreadPoolExecutor's
    if type(workers) is int and 0 < workers < len(batch):
        _fan_out(timer, executor, batch, workers)
        return
    submit = executor.submit
    i = 0
    try:
        for task in batch:
            submit(_run_one, timer, task)
            i += 1
    except RuntimeError:
        # The executor was shut down under us: nothing may be lost
        # silently, so the tasks not submitted are cancelled and the
        # fact logged (those submitted before still run).
        _refused(timer, batch[i:])


def _fan_out(
    timer: SystemTimer,
    executor: concurrent.futures.Executor,
    batch: list[TimerTask],
    n: int,
) -> None:
    """Submit ``n`` runners that share ``batch``'s tasks (see _dispatch)."""
    queue = deque(batch)
    for i in range(n):
        try:
            executor.submit(_drain, timer, queue)
        except RuntimeError:
            if i == 0:  # no runner: cancel and log, as for one submit each
                _refused(timer, list(queue))
                queue.clear()
            return  # else the runners submitted take every task


def _drain(timer: SystemTimer, queue: deque[TimerTask]) -> None:
    """A pool runner: run tasks from the bucket's queue until it is empty."""
    pop = queue.popleft
    while True:
        try:
            task = pop()  # atomic: each task goes to one runner
        except IndexError:
            return
        _run_one(timer, task)


def _run_one(timer: SystemTimer, task: TimerTask) -> None:
    """Run one due task on a pool thread (cancelled if the timer closed)."""
    if timer.closed:
        task.cancel()
        return
    try:
        timer._run((task,), timer._on_error)
    except BaseException:
        # SystemExit/KeyboardInterrupt-like: the task is done; a pool
        # thread would only hide it in the Future nobody looks at.
        logger.exception("tickwheel timer %r: task aborted", timer.name)


def _refused(timer: SystemTimer, tasks: list[TimerTask]) -> None:
    n = sum(task.cancel() for task in tasks)
    logger.error(
        "tickwheel timer %r: executor refused %d due task(s); cancelled",
        timer.name,
        n,
    )


class MockTimer(TimerCore):
    """The same wheel on a manual clock: no threads, tasks run in advance_clock.

    A task added when already due runs synchronously inside ``add``.

    >>> timer = MockTimer(start_ms=0)
    >>> seen = []
    >>> _ = timer.schedule(20, lambda: seen.append(timer.now_ms))
    >>> _ = timer.schedule(10, lambda: seen.append(timer.now_ms))
    >>> timer.advance_clock(100), seen, len(timer)
    (True, [10, 20], 0)

    :param start_ms: initial clock value in ms
    :param tick_ms: resolution in milliseconds (>= 1)
    :param wheel_size: buckets per wheel level (>= 2)
    :param on_error: ``on_error(task, exc)`` for exceptions raised by tasks
    """

    def __init__(
        self,
        start_ms: int = 0,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        *,
        on_error: ErrorHandler | None = None,
    ) -> None:
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable, got {on_error!r}")
        super().__init__(tick_ms, wheel_size, start_ms, None, True)
        self._on_error: ErrorHandler = on_error if on_error is not None else _log_error
        self._backlog: list[TimerTask] = []

    def _on_wake(self) -> None:
        # A task added already due runs synchronously inside add().
        ready = self._take_ready()
        if ready:
            self._run(ready, self._on_error, True)

    def advance_clock(self, ms: int | float) -> bool:
        """Move the clock forward by ``ms`` and run every task that comes due.

        Tasks run in deadline order; while one runs, ``now_ms`` reads its
        deadline, so tasks it schedules inside the window run in this call.

        :return: True iff a task ran
        :raises ValueError: if ``ms`` is negative or not finite
        """
        step = _check_ms(ms, "ms")
        target = self.now_ns + step
        if target > _CLOCK_END_NS:
            # Refuse before running anything: the clock could not be set after.
            raise OverflowError(
                f"ms={ms!r} from now_ms={self.now_ms} moves the clock past the "
                f"end of its range ({_CLOCK_END_NS // _NS_PER_MS} ms)"
            )
        return self._advance_to_ns(target)

    def advance_to(self, time_ms: int) -> bool:
        """Move the clock to the absolute time ``time_ms`` (>= now_ms).

        See advance_clock.

        :raises ValueError: if ``time_ms`` is before the current time
        """
        if isinstance(time_ms, bool) or not isinstance(time_ms, int):
            raise TypeError(f"time_ms must be an int, got {time_ms!r}")
        target = time_ms * _NS_PER_MS
        if target > _CLOCK_END_NS:
            raise OverflowError(
                f"time_ms={time_ms!r} is past the end of the clock range "
                f"({_CLOCK_END_NS // _NS_PER_MS} ms)"
            )
        if target < self.now_ns:
            raise ValueError(f"time_ms={time_ms!r} is before now_ms={self.now_ms}")
        return self._advance_to_ns(target)

    def _advance_to_ns(self, target_ns: int) -> bool:
        ran = False
        run = self._run
        if self._backlog:
            # Left by a BaseException (e.g. KeyboardInterrupt) in a task last time.
            ran = bool(run(self._backlog, self._on_error, True))
            self._backlog = []
        limit_ms = target_ns // _NS_PER_MS
        while True:
            nxt = self.next_expiration_ms
            if nxt is None or nxt > limit_ms:
                break
            self._backlog = self._take_due(limit_ms, True)
            if run(self._backlog, self._on_error, True):
                ran = True
            self._backlog = []
        if target_ns > self.now_ns:
            self.now_ns = target_ns
        return ran

    def close(self) -> None:
        """Cancel every pending task and refuse new ones; idempotent."""
        self._close_core()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MockTimer now_ms={self.now_ms} pending={len(self)}>"
