"""``threading.Timer`` without a thread per timer.

Why: every started ``threading.Timer`` is an OS thread that sleeps until its
interval elapses (about 8 MB of reserved stack and a kernel task each), so
100,000 pending timeouts need 100,000 threads.  :class:`Timer` has the same
API but files itself in one shared, lazily started
:class:`~tickwheel.SystemTimer`: the whole process uses two threads (the
reaper, which sleeps until the earliest bucket is due, and one executor
thread that runs the callbacks), and a pending Timer costs a few hundred
bytes.  ``cancel()`` is O(1) and frees the slot at once.

>>> import threading
>>> from tickwheel.compat_threading import Timer, shutdown
>>> done = threading.Event()
>>> t = Timer(0.01, done.set)
>>> t.start()
>>> done.wait(5), t.join(5), t.is_alive()
(True, None, False)
>>> shutdown()   # stop the shared timer's threads (tests, embedding)

Documented differences from ``threading.Timer`` (tested in
``tests/test_compat_threading.py`` and, for subclasses,
``tests/test_compat_threading_subclass.py``):

* callbacks run on the shared executor thread, one after another, so a slow
  callback delays the ones due after it.  Pass ``timer=SystemTimer(...,
  executor=ThreadPoolExecutor(...))`` to run them on your own executor;
* a Timer is not a ``threading.Thread``: ``ident``/``native_id`` do not
  exist, ``threading.enumerate()`` does not list it, and inside the callback
  ``threading.current_thread()`` is the executor thread;
* exceptions go to ``threading.excepthook`` as in threading, with the Timer
  as ``args.thread``; the wheel keeps running;
* a subclass that overrides ``run()`` (the ``RepeatTimer`` idiom: ``while
  not self.finished.wait(self.interval): ...``) gets a thread of its own, as
  under threading: ``start()`` runs ``self.run()`` on a new thread named
  ``self.name`` with ``self.daemon``, ``join()``/``is_alive()`` follow that
  thread, and an exception from ``run()`` goes to ``threading.excepthook``.
  Such a Timer costs a thread, and the wheel (and ``timer=``) is not used;
* at interpreter exit, pending non-daemon Timers still fire before the
  shared timer stops (threading joins non-daemon threads); this waiting runs
  from ``atexit``, i.e. after threading's own shutdown;
* the interval is resolved to the wheel's 1 ms tick and never fires early;
  a NaN or non-numeric interval raises at construction.
"""

from __future__ import annotations

import atexit
import itertools
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._impl import MAX_DELAY_MS, TimerTask
from .timer import SystemTimer

__all__ = ["Timer", "get_timer", "shutdown"]

_LIMIT_MS = float(MAX_DELAY_MS - 1)
_counter = itertools.count(1)
# Guards the shared timer's creation and the lazy `finished` events, and
# wakes join()ers when a callback returns.
_lock = threading.Lock()
_done = threading.Condition(_lock)
_shared: SystemTimer | None = None
# Started Timers that have not finished: shutdown() marks them finished, and
# at exit the non-daemon ones are awaited.
_started: set[Timer] = set()

_CREATED, _PENDING, _RUNNING, _DONE = 0, 1, 2, 3


def get_timer() -> SystemTimer:
    """The shared SystemTimer behind Timer, started on first use.

    Its threads are named ``tickwheel-threading-reaper`` and
    ``tickwheel-threading-executor`` and are daemon threads.
    """
    global _shared
    timer = _shared
    if timer is None or timer.closed:
        with _lock:
            timer = _shared
            if timer is None or timer.closed:
                timer = _shared = SystemTimer(name="tickwheel-threading")
    return timer


def shutdown(wait_non_daemon: bool = False) -> None:
    """Stop the shared timer: cancel its pending Timers and join its threads.

    Idempotent; a later ``Timer.start()`` starts a new shared timer.  Called
    at interpreter exit with ``wait_non_daemon=True``.

    :param wait_non_daemon: first wait for started non-daemon Timers to fire
    """
    global _shared
    if wait_non_daemon:
        while True:
            with _lock:
                pending = [
                    t
                    for t in _started
                    if not t._tw_daemon and t._tw_timer is _shared and t._tw_alive()
                ]
            if not pending:
                break
            for t in pending:
                Timer.join(t)  # not a subclass's override (threading's neither)
    with _lock:
        timer, _shared = _shared, None
    if timer is not None:
        timer.close()
        # close() cancelled the tasks; their Timers must read as finished.
        with _lock:
            for t in [t for t in _started if t._tw_timer is timer]:
                t._tw_finish_locked()
            _done.notify_all()


def _after_fork_in_child() -> None:
    # A parent thread may have held _lock at fork(); and the parent's pending
    # Timers do not run in the child (SystemTimer cancels them there).
    global _lock, _done
    _lock = threading.Lock()
    _done = threading.Condition(_lock)
    _started.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
# Registered after tickwheel.timer's own exit hook, so it runs first (LIFO):
# non-daemon Timers fire before the timers are closed.
atexit.register(shutdown, True)


def _invoke_excepthook(timer: Timer) -> None:
    """Report the exception being handled as threading does for a thread.

    ``threading.excepthook`` gets the Timer as ``args.thread``; if the hook
    itself raises, that is printed and passed to ``sys.excepthook``, as
    threading's ``Thread._invoke_excepthook`` does.
    """
    exc_type, exc, tb = sys.exc_info()
    try:
        threading.excepthook(threading.ExceptHookArgs((exc_type, exc, tb, timer)))
    except Exception:
        if sys.stderr is not None:
            print("Exception in threading.excepthook:", file=sys.stderr, flush=True)
        sys.excepthook(*sys.exc_info())
    finally:
        del exc, tb


def _check_interval(interval: object) -> float:
    """Seconds -> milliseconds, clamped to the wheel's range; raise on bad input."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        try:
            interval = float(interval)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise TypeError(
                f"interval must be a number of seconds, got {interval!r}"
            ) from None
    ms = interval * 1000.0
    if math.isnan(ms):
        raise ValueError(f"interval must not be NaN, got {interval!r}")
    return max(-_LIMIT_MS, min(_LIMIT_MS, ms))


class _FinishedEvent(threading.Event):
    """``Timer.finished``: setting it cancels the Timer, as in threading."""

    def __init__(self, timer: Timer) -> None:
        super().__init__()
        self._tw_timer = timer

    def set(self) -> None:
        super().set()
        # Not the Timer's cancel(): as in threading, setting `finished` does
        # not call a subclass's cancel() override (which may itself call
        # finished.set()).
        self._tw_timer._tw_cancel()


class Timer:
    # Private attributes and methods start with `_tw_`, so that a subclass's
    # own `_state`, `_timer`, `_thread`... cannot clobber them.
    """Call a function after a number of seconds: ``threading.Timer``'s API.

    ``start()`` files the timer in a shared timing wheel instead of starting
    a thread.  ``cancel()`` stops it if it has not run yet; a Timer can be
    started once.  A subclass that overrides ``run()`` runs it on a thread of
    its own, as ``threading.Timer`` does (see the module docstring).

    Runtime complexity: start O(levels), cancel O(1).

    >>> t = Timer(60.0, print, ["never"])
    >>> t.start(); t.is_alive()
    True
    >>> t.cancel(); t.is_alive(), t.finished.is_set()
    (False, True)

    :param interval: seconds (int or float; <= 0 runs at once)
    :param function: the callable to run
    :param args: positional arguments (default: a new empty list)
    :param kwargs: keyword arguments (default: a new empty dict)
    :param timer: keyword-only; the SystemTimer to use (default: the shared one)
    :raises TypeError: if ``function`` is not callable or ``interval`` not a number
    :raises ValueError: if ``interval`` is NaN
    """

    __slots__ = (
        "interval",
        "function",
        "args",
        "kwargs",
        "_tw_name",
        "_tw_ident",
        "_tw_daemon",
        "_tw_state",
        "_tw_finished",
        "_tw_finished_flag",
        "_tw_task",
        "_tw_timer",
        "_tw_started",
        "_tw_runner",
        "_tw_thread",
        "__weakref__",
    )

    def __init__(
        self,
        interval: float,
        function: Callable[..., object],
        args: Iterable[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        *,
        timer: SystemTimer | None = None,
    ) -> None:
        self._tw_interval_ms(interval)
        if not callable(function):
            raise TypeError(f"function must be callable, got {function!r}")
        if timer is not None and not isinstance(timer, SystemTimer):
            raise TypeError(f"timer must be a SystemTimer, got {timer!r}")
        self.interval = interval
        self.function = function
        self.args = args if args is not None else []
        self.kwargs = kwargs if kwargs is not None else {}
        self._tw_name: str | None = None  # "Timer-<_ident>", built when read
        self._tw_ident = next(_counter)
        self._tw_daemon = threading.current_thread().daemon
        self._tw_state = _CREATED
        self._tw_started = False
        # The Event is created on first access of `finished` (1.2 kB each).
        self._tw_finished: threading.Event | None = None
        self._tw_finished_flag = False
        self._tw_task: TimerTask | None = None
        self._tw_timer = timer
        self._tw_runner: threading.Thread | None = None
        # The thread of its own, for a subclass that overrides run().
        self._tw_thread: threading.Thread | None = None

    @staticmethod
    def _tw_interval_ms(interval: object) -> float:
        return _check_interval(interval)

    # -- threading.Thread-like attributes ------------------------------------
    @property
    def name(self) -> str:
        """A name for messages (``Timer-N``); settable."""
        name = self._tw_name
        if name is None:
            name = self._tw_name = f"Timer-{self._tw_ident}"
        return name

    @name.setter
    def name(self, value: str) -> None:
        self._tw_name = str(value)
        if self._tw_thread is not None:
            self._tw_thread.name = self._tw_name

    @property
    def daemon(self) -> bool:
        """False (inherited from the creating thread) makes exit wait for it."""
        return self._tw_daemon

    @daemon.setter
    def daemon(self, value: bool) -> None:
        if self._tw_started:
            raise RuntimeError("cannot set daemon status of active thread")
        self._tw_daemon = bool(value)

    def isDaemon(self) -> bool:  # noqa: N802 - threading's legacy name
        """Deprecated alias of the ``daemon`` attribute (as in threading)."""
        return self._tw_daemon

    def setDaemon(self, daemonic: bool) -> None:  # noqa: N802
        """Deprecated setter of ``daemon`` (as in threading)."""
        self.daemon = daemonic

    def getName(self) -> str:  # noqa: N802
        """Deprecated alias of ``name`` (as in threading)."""
        return self.name

    def setName(self, name: str) -> None:  # noqa: N802
        """Deprecated setter of ``name`` (as in threading)."""
        self.name = name

    @property
    def finished(self) -> threading.Event:
        """The Event set when the Timer is cancelled or its function returned.

        Setting it (``timer.finished.set()``) cancels the timer, as in threading.
        """
        ev = self._tw_finished
        if ev is None:
            with _lock:
                ev = self._tw_finished
                if ev is None:
                    ev = self._tw_finished = _FinishedEvent(self)
                    if self._tw_finished_flag:
                        threading.Event.set(ev)
        return ev

    def _tw_is_finished(self) -> bool:
        ev = self._tw_finished
        return self._tw_finished_flag or (ev is not None and ev.is_set())

    def _tw_finish_locked(self) -> None:
        # Mark finished (caller holds _lock) and wake joiners.
        self._tw_finished_flag = True
        if self._tw_state != _RUNNING:
            self._tw_state = _DONE
        _started.discard(self)
        ev = self._tw_finished
        if ev is not None:
            threading.Event.set(ev)  # not _FinishedEvent.set: _lock is held
        _done.notify_all()

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        """Schedule the Timer on the wheel.

        :raises RuntimeError: if started before ("threads can only be started once")
        """
        if self._tw_overrides_run():
            self._tw_start_thread()
            return
        with _lock:
            if self._tw_started:
                raise RuntimeError("threads can only be started once")
            self._tw_started = True
            if self._tw_is_finished():
                # cancelled before start: threading runs a thread that exits.
                self._tw_state = _DONE
                return
            self._tw_state = _PENDING
            _started.add(self)
        timer = self._tw_timer if self._tw_timer is not None else get_timer()
        self._tw_timer = timer
        try:
            self._tw_task = timer.schedule(
                self._tw_interval_ms(self.interval), self._tw_fire
            )
        except BaseException:
            with _lock:
                self._tw_finish_locked()
            raise

    def _tw_overrides_run(self) -> bool:
        run = self.run
        return getattr(run, "__func__", run) is not Timer.run

    def _tw_start_thread(self) -> None:
        # A subclass's run() may block for as long as it likes (RepeatTimer
        # loops until cancelled), so it cannot share the executor: give it a
        # thread, which threading would have done anyway.
        with _lock:
            if self._tw_started:
                raise RuntimeError("threads can only be started once")
            self._tw_started = True
            self._tw_state = _RUNNING
            self._tw_thread = threading.Thread(
                target=self._tw_bootstrap, name=self.name, daemon=self._tw_daemon
            )
        self.finished  # noqa: B018 - create the Event before run() waits on it
        try:
            self._tw_thread.start()
        except BaseException:
            with _lock:
                self._tw_state = _DONE
                self._tw_thread = None
                _done.notify_all()
            raise

    def _tw_bootstrap(self) -> None:
        # The thread of its own: what threading.Thread._bootstrap_inner does.
        try:
            self.run()
        except BaseException:
            _invoke_excepthook(self)
        finally:
            with _lock:
                self._tw_state = _DONE
                _done.notify_all()

    def run(self) -> None:
        """What threading's thread runs: wait ``interval``, then call the function.

        Blocks the caller (as ``threading.Timer.run()`` does); ``start()`` is
        the non-blocking way.
        """
        self.finished.wait(max(0.0, float(self.interval)))
        if not self._tw_is_finished():
            self.function(*self.args, **self.kwargs)
        with _lock:
            self._tw_finish_locked()

    def _tw_fire(self) -> None:
        # Runs on the executor thread when the interval has elapsed.
        with _lock:
            if self._tw_is_finished() or self._tw_state != _PENDING:
                self._tw_state = _DONE
                _started.discard(self)
                _done.notify_all()
                return
            self._tw_state = _RUNNING
            self._tw_runner = threading.current_thread()
        try:
            self.function(*self.args, **self.kwargs)
        except BaseException:
            # threading.Timer: the exception ends the thread via excepthook,
            # and `finished` is left unset.  Any exception, as threading's
            # _bootstrap_inner: the default hook ignores SystemExit, so
            # sys.exit() in a callback ends it quietly.  The hook runs
            # before the Timer is marked done, as a thread's runs before
            # join() returns (with the GIL off, join() would otherwise
            # return while the hook is still running on this thread).
            try:
                _invoke_excepthook(self)
            finally:
                with _lock:
                    self._tw_state = _DONE
                    self._tw_runner = None
                    _started.discard(self)
                    _done.notify_all()
            return
        with _lock:
            self._tw_state = _DONE
            self._tw_runner = None
            self._tw_finish_locked()

    def cancel(self) -> None:
        """Stop the Timer if it has not run yet (no effect afterwards).

        Runtime complexity: O(1).
        """
        self._tw_cancel()

    def _tw_cancel(self) -> None:
        # cancel() without a subclass's override (what finished.set() calls).
        with _lock:
            task = self._tw_task
            was_pending = self._tw_state == _PENDING
            self._tw_finish_locked()
        if was_pending and task is not None:
            task.cancel()

    def is_alive(self) -> bool:
        """True from start() until the function returned or the Timer was cancelled."""
        return self._tw_alive()

    def _tw_alive(self) -> bool:
        # is_alive() without a subclass's override: join() and shutdown()
        # call it with _lock held, where an override could deadlock.
        thread = self._tw_thread
        if thread is not None:
            return thread.is_alive()
        state = self._tw_state
        if state == _PENDING:
            task = self._tw_task
            if task is not None and task.cancelled:  # e.g. its timer was closed
                return False
            return True
        return state == _RUNNING

    def join(self, timeout: float | None = None) -> None:
        """Wait until the Timer has run or been cancelled, at most ``timeout`` s.

        :raises RuntimeError: if not started, or called from the Timer's own callback
        """
        if not self._tw_started:
            raise RuntimeError("cannot join thread before it is started")
        thread = self._tw_thread
        if thread is not None:
            thread.join(timeout)  # raises "cannot join current thread" from run()
            return
        if self._tw_runner is threading.current_thread() and self._tw_state == _RUNNING:
            raise RuntimeError("cannot join current thread")
        with _done:
            _done.wait_for(lambda: not self._tw_alive(), timeout)

    def __repr__(self) -> str:
        status = "initial"
        if self._tw_started:
            status = "started" if self.is_alive() else "stopped"
        if self._tw_daemon:
            status += " daemon"
        return f"<{type(self).__name__}({self.name}, {status})>"
