"""The wheel layer of :mod:`tickwheel.compat_asyncio`: the wheel and timeouts.

Holds :class:`TimerWheel` (a timing wheel driven by one loop's ``call_at``),
the functions acting on a loop's wheel, and :class:`Timeout`, which the
wheel's ``timeout()`` makes and which needs its wheel's loop in turn (so the
two share a module).  :mod:`tickwheel._asyncio_loop` (the event loop whose
``call_later``/``call_at`` use the wheel) builds on it, and
:mod:`tickwheel.compat_asyncio` re-exports both.  Imports point down only::

    compat_asyncio     public names (re-exports)
    _asyncio_loop      the tickwheel event loop
    _asyncio_wheel     this module: TimerWheel on one loop's call_at, Timeout
    _asyncio_handles   TimerHandle, what call_later/call_at return
    _asyncio_time      seconds to the wheel's ms and ns; which clock a loop reads
    _impl              the chosen core (TimerCore, TimerTask)

The design, the worked example and the differences from asyncio are in
:mod:`tickwheel.compat_asyncio`'s docstring.  Import the public names from
there.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import math
import operator
import sys
import weakref
from asyncio import events as _events
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._asyncio_handles import (
    TimerHandle,
    _Context,
    _ContextTimerHandle,
    _ExplicitContextTimerHandle,
)
from ._asyncio_time import (
    _LIMIT_MS,
    _delay_ms,
    _is_uvloop,
    _pin_deadline,
    _uses_monotonic_clock,
)
from ._asyncio_time import (
    _reads_cached_clock as _reads_cached_clock,  # for _asyncio_loop
)
from ._impl import (
    DEFAULT_TICK_MS,
    DEFAULT_WHEEL_SIZE,
    TimerCore,
    TimerTask,
    _use_loop_handles,
)

if TYPE_CHECKING:  # typing.Self is 3.11+; mypy knows typing_extensions' copy
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

__all__ = [
    "Timeout",
    "TimerHandle",
    "TimerWheel",
    "call_at",
    "call_later",
    "get_wheel",
    "timeout",
    "timeout_at",
]

_get_running_loop = _events.get_running_loop
_copy_context = contextvars.copy_context
# Contexts with more variables than this are not de-duplicated (the identity
# check is O(variables)); each such handle keeps its own snapshot.
_MAX_SHARED_VARS = 16
_MISSING = object()
# The driver's own loop handle runs in this (otherwise unused) context, which
# saves asyncio a copy_context() per re-arm; each task enters its own context.
_DRIVER_CONTEXT = _Context()
_task_cancel = TimerTask.cancel
_DEADLINE = operator.attrgetter("deadline_ns")
# Unbound, so the hot path skips creating a bound method per call.
_core_add = TimerCore.add
# One C call that makes the handle (no __init__) and adds it
# (see TimerCore.schedule_as).
_schedule_as = TimerCore.schedule_as


class TimerWheel(TimerCore):
    """A timing wheel bound to one event loop, driven by one ``loop.call_at``.

    The wheel's clock is the loop's: ``time.monotonic_ns`` (read in C) for
    asyncio's loops and uvloop, whose ``time()`` read the same clock, and
    ``loop.time()`` for any other loop (for example one with virtual time).
    Only one asyncio handle is ever scheduled, for the earliest due bucket;
    adding an earlier timer re-arms it.  Not thread-safe, like the loop: call
    it from the loop thread (use ``loop.call_soon_threadsafe`` from elsewhere).

    Runtime complexity: call_later/call_at O(levels), cancel O(1).

    >>> import asyncio
    >>> async def main():
    ...     wheel = TimerWheel()
    ...     seen = []
    ...     wheel.call_later(0.002, seen.append, "b")
    ...     wheel.call_later(0.001, seen.append, "a")
    ...     wheel.call_later(0.001, seen.append, "x").cancel()
    ...     await asyncio.sleep(0.05)
    ...     return seen, len(wheel)
    >>> asyncio.run(main())
    (['a', 'b'], 0)

    :param loop: the event loop (default: the running loop)
    :param tick_ms: resolution in milliseconds (>= 1)
    :param wheel_size: buckets per wheel level (>= 2)
    :raises TypeError: if ``loop`` is not an event loop
    :raises RuntimeError: if ``loop`` is None and no loop is running
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
    ) -> None:
        if loop is None:
            loop = _get_running_loop()
        elif not isinstance(loop, asyncio.AbstractEventLoop):
            raise TypeError(f"loop must be an asyncio event loop, got {loop!r}")
        # The loop is held weakly: the registry maps loops to wheels, and a
        # strong reference back would keep every loop alive.
        ref = weakref.ref(loop)
        clock: Callable[[], int] | None = None
        if not _uses_monotonic_clock(loop):

            def clock() -> int:
                lp = ref()
                return 0 if lp is None else round(lp.time() * 1e9)

        super().__init__(tick_ms, wheel_size, None, clock, False)
        self._loop_ref = ref
        self._driver: asyncio.Handle | None = None
        self._armed_ns: int | None = None
        # Expired tasks taken from the core whose exact deadline has not come
        # yet (or left by an exception), sorted by deadline_ns.
        self._held: list[TimerTask] | None = None
        # The driver takes the next tick's bucket early (at its slot's
        # start) and runs each task once the clock reaches its exact deadline.
        self._lead_ms = self.tick_ms
        # uvloop's call_at rounds to libuv's 1 ms resolution (a timer under
        # 0.5 ms ahead runs at once): arm it for whole milliseconds, so the
        # driver never spins waiting for a deadline inside the current one.
        self._whole_ms = _is_uvloop(loop)
        self._shared_context: contextvars.Context | None = None

    # -- public API ------------------------------------------------------------
    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop this wheel is bound to (None once it was garbage-collected)."""
        return self._loop_ref()

    def time(self) -> float:
        """The wheel's clock in loop-time seconds (the same clock as loop.time())."""
        return self.now_ns / 1e9

    def call_later(
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> TimerHandle:
        """Run ``callback(*args)`` in the loop thread after ``delay`` seconds.

        Like ``loop.call_later``: the callback runs in a copy of the current
        context, or in ``context`` if given.  A delay <= 0 runs it on the next
        loop iteration.

        Runtime complexity: O(levels); ``handle.cancel()`` is O(1).

        :param delay: seconds (int or float); rounded up to the tick
        :param callback: a callable
        :param context: a contextvars.Context to run the callback in
        :return: a TimerHandle with cancel(), cancelled() and when()
        :raises TypeError: if ``callback`` is not callable or ``delay`` not a number
        :raises ValueError: if ``delay`` is NaN
        """
        # The hot path: one context copy, one allocation, one O(levels) add.
        # The core validates delay_ms and fn; only if it refuses them does
        # _new_handle() run again to raise with *our* argument names.
        handle: TimerHandle
        if context is None:
            ctx = _copy_context()
            try:
                if ctx:  # any variable set? (truth is len(), without a call)
                    shared = _schedule_as(
                        self, _ContextTimerHandle, delay * 1000.0, callback, *args
                    )
                    shared._context = self._share(ctx)  # set before the loop runs it
                    return shared
                if args:
                    return _schedule_as(
                        self, TimerHandle, delay * 1000.0, callback, *args
                    )
                return _schedule_as(
                    self, TimerHandle, delay * 1000.0, callback
                )  # no star-call
            except (TypeError, ValueError, OverflowError):
                handle = self._new_handle(delay, callback, args, ctx, False)
        else:
            handle = self._new_handle(delay, callback, args, context, True)
        _core_add(self, handle)
        return handle

    def call_at(
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> TimerHandle:
        """Run ``callback(*args)`` at loop time ``when`` (see :meth:`call_later`).

        :param when: an absolute time on the loop's clock, in seconds
        :raises TypeError: if ``when`` is not a number
        """
        try:
            delay = when - self.now_ns / 1e9
        except TypeError:
            raise TypeError(f"when must be a number of seconds, got {when!r}") from None
        if delay != delay:
            raise ValueError(f"when must not be NaN, got {when!r}")
        handle = self.call_later(delay, callback, *args, context=context)
        if math.isfinite(when):
            _pin_deadline(handle, when, self)
            handle._when_s = when  # when() answers it while it is the deadline
        return handle

    def timeout(self, delay: float | None) -> Timeout:
        """An ``asyncio.timeout(delay)`` driven by this wheel (see :class:`Timeout`)."""
        if delay is None:
            return Timeout(None, self)
        _delay_ms(delay, "delay")
        # loop.time() + delay, as asyncio computes it (the wheel's clock reads
        # the same time, but a virtual-time loop's only up to the nanosecond).
        loop = self._loop_ref()
        return Timeout((self.time() if loop is None else loop.time()) + delay, self)

    def timeout_at(self, when: float | None) -> Timeout:
        """An ``asyncio.timeout_at(when)`` driven by this wheel."""
        if when is not None:
            _delay_ms(when, "when")
        return Timeout(when, self)

    def close(self) -> None:
        """Cancel every pending timer and the loop handle; refuse new timers."""
        driver, self._driver, self._armed_ns = self._driver, None, None
        if driver is not None:
            driver.cancel()
        held, self._held = self._held, None
        for task in held or ():
            _task_cancel(task)
        self._close_core()
        loop = self._loop_ref()
        if loop is not None and _WHEELS.get(loop) is self:
            del _WHEELS[loop]
        global _last_wheel
        if _last_wheel is self:
            _last_wheel = None

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<TimerWheel {state} pending={len(self)} loop={self._loop_ref()!r}>"

    # -- driver ------------------------------------------------------------------
    def _new_handle(
        self,
        delay: object,
        callback: object,
        args: tuple[Any, ...],
        context: object,
        explicit: bool,
    ) -> TimerHandle:
        """Validate call_later's arguments (raising with their names), clamp, build."""
        delay_ms = _delay_ms(delay, "delay")
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {callback!r}")
        if not isinstance(context, _Context):
            raise TypeError(f"context must be a contextvars.Context, got {context!r}")
        if explicit:
            explicit_handle = _ExplicitContextTimerHandle(delay_ms, callback, *args)
            explicit_handle._context = context
            return explicit_handle
        if len(context):
            shared = _ContextTimerHandle(delay_ms, callback, *args)
            shared._context = self._share(context)
            return shared
        return TimerHandle(delay_ms, callback, *args)

    def _share(self, ctx: contextvars.Context) -> contextvars.Context:
        # Return an earlier snapshot holding the very same (variable, value)
        # pairs, so that handles from one task share one Context object.
        last = self._shared_context
        if last is not None and len(last) == len(ctx) <= _MAX_SHARED_VARS:
            get = last.get
            for var, value in ctx.items():
                if get(var, _MISSING) is not value:
                    break
            else:
                return last
        self._shared_context = ctx
        return ctx

    def _on_wake(self) -> None:
        # Called by the core when a timer landed in a bucket earlier than every
        # queued one, or was already due.
        self._arm()

    def _arm(self) -> None:
        # The driver wakes for the earliest of: the first held task's exact
        # deadline, and the start of the next bucket's slot (where its
        # earliest deadline may lie).
        nxt = self.next_expiration_ms
        held = self._held
        if nxt is None:
            if not held:
                return
            at_ns = held[0].deadline_ns
        else:
            at_ns = (nxt - self._lead_ms) * 1_000_000
            if held:
                first = held[0].deadline_ns
                if first < at_ns:
                    at_ns = first
        if self._whole_ms:
            at_ns = -(-at_ns // 1_000_000) * 1_000_000
        armed = self._armed_ns
        if armed is not None:
            if armed <= at_ns:
                return
            assert self._driver is not None
            self._driver.cancel()
        loop = self._loop_ref()
        if loop is None:
            return
        self._armed_ns = at_ns
        # A tickwheel event loop sends call_at to this wheel: use its base's.
        call_at = getattr(loop, "_tickwheel_base_call_at", loop.call_at)
        self._driver = call_at(at_ns / 1e9, self._fire, context=_DRIVER_CONTEXT)

    def _fire(self) -> None:
        self._driver = None
        self._armed_ns = None
        now_ns = self.now_ns
        # The buckets of the next tick are taken too: their tasks fall due
        # within it, each at its own deadline (until then they are held).
        batch = self._take_due(now_ns // 1_000_000 + self._lead_ms)
        held = self._held
        if held is not None:
            self._held = None
            batch = held + batch if batch else held
        if batch:
            if len(batch) > 1:
                # asyncio's order: by exact deadline, ties as scheduled (the
                # sort is stable and poll hands out a bucket as linked).
                batch.sort(key=_DEADLINE)
            if batch[-1].deadline_ns > now_ns:
                due = 0
                for task in batch:
                    if task.deadline_ns > now_ns:
                        break
                    due += 1
                self._held = batch[due:]
                batch = batch[:due]
            if batch:
                self._run_batch(batch)
        self._arm()

    def _run_batch(self, batch: list[TimerTask]) -> None:
        try:
            self._run(batch, self._on_error)
        except BaseException:
            # SystemExit/KeyboardInterrupt (or CancelledError) from a callback
            # leave the loop; the rest of the batch is still "expired" and runs
            # on the next iteration, as asyncio's ready queue would (_run
            # skips the tasks that ran).
            held = self._held
            self._held = batch + held if held else batch
            loop = self._loop_ref()
            if loop is not None and not loop.is_closed():
                if self._driver is not None:  # armed by a callback of this batch
                    self._driver.cancel()
                self._armed_ns = self.now_ns
                self._driver = loop.call_soon(self._fire, context=_DRIVER_CONTEXT)
            raise

    def _on_error(self, task: TimerTask, exc: BaseException) -> None:
        loop = self._loop_ref()
        if loop is None:
            return
        loop.call_exception_handler(
            {
                "message": f"Exception in callback {task!r}",
                "exception": exc,
                "handle": task,
            }
        )


# TimerCore._loop_call_later/_loop_call_at (the tickwheel loop's call_later
# and call_at) make these handles, and hand what they refuse to these
# methods: the core calls nothing of this layer but what it is given here.
_use_loop_handles(
    TimerHandle,
    _ContextTimerHandle,
    TimerWheel.call_later,
    TimerWheel.call_at,
    TimerWheel._share,
)

_WHEELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TimerWheel] = (
    weakref.WeakKeyDictionary()
)
_last_wheel: TimerWheel | None = None


def get_wheel(loop: asyncio.AbstractEventLoop | None = None) -> TimerWheel:
    """The :class:`TimerWheel` of ``loop`` (default: the running loop).

    Created on first use and kept as long as the loop lives.

    :raises RuntimeError: if ``loop`` is None and no loop is running
    """
    global _last_wheel
    if loop is None:
        loop = _get_running_loop()
    wheel = _last_wheel
    if wheel is not None and wheel._loop_ref() is loop:
        return wheel
    wheel = _WHEELS.get(loop)
    if wheel is None or wheel.closed:
        wheel = TimerWheel(loop)
        _WHEELS[loop] = wheel
    _last_wheel = wheel
    return wheel


def call_later(
    delay: float,
    callback: Callable[..., object],
    *args: Any,
    context: contextvars.Context | None = None,
) -> TimerHandle:
    """``loop.call_later`` on the running loop's wheel (see TimerWheel.call_later)."""
    # get_wheel() inlined: this is the hot path of a server's idle timeouts.
    loop = _get_running_loop()
    wheel = _last_wheel
    if wheel is None or wheel._loop_ref() is not loop:
        wheel = get_wheel(loop)
    # TimerWheel.call_later is the one implementation.  The common call (no
    # args, no context) passes neither *args nor a keyword: a star-call with a
    # keyword would cost as much again as the rest of the work.
    if context is None and not args:
        return wheel.call_later(delay, callback)
    return wheel.call_later(delay, callback, *args, context=context)


def call_at(
    when: float,
    callback: Callable[..., object],
    *args: Any,
    context: contextvars.Context | None = None,
) -> TimerHandle:
    """``loop.call_at`` on the running loop's wheel; see :meth:`TimerWheel.call_at`."""
    return get_wheel().call_at(when, callback, *args, context=context)


# 3.13 turned a CancelledError subclass into TimeoutError too, and threads a
# TimeoutError into the context chain of any other exception leaving an
# expired block (3.14's timeouts.py keeps that __aexit__); 3.11 and 3.12 only
# convert CancelledError itself.
_CHAIN_TIMEOUT_ERROR = sys.version_info >= (3, 13)

if sys.version_info >= (3, 11):
    _TimeoutError = TimeoutError
else:

    class _TimeoutError(asyncio.TimeoutError, TimeoutError):  # type: ignore[misc]
        """Before 3.11 asyncio.TimeoutError is not the builtin: this is both."""

    _TimeoutError.__name__ = _TimeoutError.__qualname__ = "TimeoutError"


class _State(enum.Enum):
    CREATED = "created"
    ENTERED = "active"
    EXPIRING = "expiring"
    EXPIRED = "expired"
    EXITED = "finished"


def _insert_timeout_error(exc_val: BaseException) -> None:
    # 3.13's Timeout._insert_timeout_error: put a TimeoutError between the
    # first CancelledError in the context chain and what it interrupted.
    while exc_val.__context__ is not None:
        if isinstance(exc_val.__context__, asyncio.CancelledError):
            te = _TimeoutError()
            te.__context__ = te.__cause__ = exc_val.__context__
            exc_val.__context__ = te
            break
        exc_val = exc_val.__context__


class Timeout(TimerTask):
    """Async context manager that cancels the enclosing task at a deadline.

    The semantics, states and messages of the running Python's
    ``asyncio.Timeout``: on expiry it cancels the task it was entered in; on
    exit it turns that task's CancelledError into TimeoutError unless someone
    else also cancelled the task (``Task.uncancel()`` bookkeeping), so nested
    timeouts and outside cancellation behave as in asyncio.  On 3.13+ a
    different exception leaving an expired block gets a TimeoutError chained
    in its context, as in 3.13.  A deadline at or before ``loop.time()`` is
    handled with ``loop.call_soon``, so it fires before the task resumes.
    The object is itself the wheel node, so a pending timeout costs one
    object (plus its ``when``).

    Use :func:`timeout` / :func:`timeout_at` (or the TimerWheel methods).

    Runtime complexity: enter, reschedule and exit are O(levels) or better.
    """

    __slots__ = (
        "_tm_when",
        "_tm_state",
        "_tm_task",
        "_tm_cancelling",
        "_tm_wheel",
        "_tm_soon",
    )

    def __init__(self, when: float | None, wheel: TimerWheel) -> None:
        super().__init__(0)
        self._tm_when = when
        self._tm_state = _State.CREATED
        self._tm_task: asyncio.Task[Any] | None = None
        self._tm_cancelling = 0
        self._tm_wheel = wheel
        # The loop.call_soon handle of a deadline that was already past.
        self._tm_soon: asyncio.Handle | None = None

    def when(self) -> float | None:
        """The current deadline in loop-time seconds, or None."""
        return self._tm_when

    def reschedule(self, when: float | None) -> None:
        """Move the deadline to ``when`` (loop time), or disable it with None.

        A deadline at or before ``loop.time()`` expires on the next loop
        iteration, before the task resumes (as in asyncio).

        :raises RuntimeError: unless the timeout is entered and not expiring
        :raises TypeError: if ``when`` is not a number or None
        :raises ValueError: if ``when`` is NaN
        """
        if self._tm_state is not _State.ENTERED:
            if self._tm_state is _State.CREATED:
                raise RuntimeError("Timeout has not been entered")
            raise RuntimeError(f"Cannot change state of {self._tm_state.value} Timeout")
        self._cancel_timer()
        if when is None:
            self._tm_when = None
            return
        wheel = self._tm_wheel
        loop = wheel._loop_ref()
        if loop is None:
            loop = _get_running_loop()
        now = loop.time()
        try:
            delay = when - now
        except TypeError:
            raise TypeError(f"when must be a number of seconds, got {when!r}") from None
        delay_ms = _delay_ms(delay, "when")
        self._tm_when = when
        if when <= now:
            self._tm_soon = loop.call_soon(self._on_soon, context=_DRIVER_CONTEXT)
            return
        self.delay_ms = delay_ms
        wheel.add(self)
        _pin_deadline(self, when, wheel)

    def postpone(self, delay: float) -> bool:
        """Move the deadline to ``delay`` seconds from now: ``reschedule(now + delay)``.

        :return: True (the deadline moved)
        :raises RuntimeError: unless the timeout is entered and not expiring
        :raises TypeError: if ``delay`` is not a number
        """
        delay_ms = _delay_ms(delay, "delay")
        if not -_LIMIT_MS < delay_ms < _LIMIT_MS:
            delay = delay_ms / 1000  # clamped, like call_later's
        loop = self._tm_wheel._loop_ref()
        self.reschedule(
            (self._tm_wheel.time() if loop is None else loop.time()) + delay
        )
        return True

    def expired(self) -> bool:
        """True once the deadline passed while the block was running."""
        return self._tm_state is _State.EXPIRING or self._tm_state is _State.EXPIRED

    def run(self) -> None:
        """At the deadline: cancel the task (asyncio's _on_timeout)."""
        assert self._tm_state is _State.ENTERED
        assert self._tm_task is not None
        self._tm_task.cancel()
        self._tm_state = _State.EXPIRING

    def _on_soon(self) -> None:
        self._tm_soon = None
        self.run()

    def _cancel_timer(self) -> None:
        TimerTask.cancel(self)
        soon = self._tm_soon
        if soon is not None:
            self._tm_soon = None
            soon.cancel()

    def __repr__(self) -> str:
        info = ""
        if self._tm_state is _State.ENTERED:
            when = round(self._tm_when, 3) if self._tm_when is not None else None
            info = f" when={when}"
        return f"<Timeout [{self._tm_state.value}]{info}>"

    async def __aenter__(self) -> Self:
        if self._tm_state is not _State.CREATED:
            raise RuntimeError("Timeout has already been entered")
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Timeout should be used inside a task")
        self._tm_state = _State.ENTERED
        self._tm_task = task
        # Task.cancelling()/uncancel() are new in 3.11; before, every
        # CancelledError after our deadline is taken as ours.
        if sys.version_info >= (3, 11):
            self._tm_cancelling = task.cancelling()
        else:
            self._tm_cancelling = 0
        self.reschedule(self._tm_when)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        assert self._tm_state in (_State.ENTERED, _State.EXPIRING)
        self._cancel_timer()
        if self._tm_state is _State.EXPIRING:
            self._tm_state = _State.EXPIRED
            assert self._tm_task is not None
            if sys.version_info >= (3, 11):
                pending = self._tm_task.uncancel()
            else:
                pending = 0
            if pending <= self._tm_cancelling and exc_type is not None:
                # No other cancel request is pending: this one was ours.
                if not _CHAIN_TIMEOUT_ERROR:
                    if exc_type is asyncio.CancelledError:
                        raise _TimeoutError from exc_val
                elif issubclass(exc_type, asyncio.CancelledError):
                    raise _TimeoutError from exc_val
                elif exc_val is not None:
                    _insert_timeout_error(exc_val)
                    # (3.13+ here; the version test is for type checkers on 3.10.)
                    if sys.version_info >= (3, 11) and isinstance(
                        exc_val,
                        ExceptionGroup,  # noqa: F821
                    ):
                        for exc in exc_val.exceptions:
                            _insert_timeout_error(exc)
        elif self._tm_state is _State.ENTERED:
            self._tm_state = _State.EXITED
        return None


def timeout(delay: float | None) -> Timeout:
    """``asyncio.timeout(delay)`` on the running loop's wheel.

    ``delay`` is in seconds, or None for no deadline.  The block's task is
    cancelled at the deadline and TimeoutError raised on exit.

    :raises RuntimeError: if no loop is running
    :raises TypeError: if ``delay`` is not a number or None
    """
    return get_wheel().timeout(delay)


def timeout_at(when: float | None) -> Timeout:
    """``asyncio.timeout_at(when)`` on the running loop's wheel (loop-time seconds)."""
    return get_wheel().timeout_at(when)


# The public names keep the module users import them from (help(), repr()).
for _public in (
    Timeout,
    TimerHandle,
    TimerWheel,
    call_at,
    call_later,
    get_wheel,
    timeout,
    timeout_at,
):
    _public.__module__ = f"{__package__}.compat_asyncio"
del _public
