"""Loop time for the wheel: seconds to milliseconds, exact deadlines, clocks.

asyncio speaks in float seconds of ``loop.time()``; the wheel in
milliseconds and nanoseconds of its own clock.  Here: the conversion of a
delay (clamped to the core's range, errors naming the argument), the exact
nanosecond of a loop time, pinning a task to that deadline, and which loops
read the clock the wheel can read in C.  Used by the handles, the wheel and
``Timeout`` (:mod:`tickwheel._asyncio_wheel`).
"""

from __future__ import annotations

import asyncio
import math
import time

from ._impl import MAX_DELAY_MS, TimerCore, TimerTask

_BaseEventLoop_time = asyncio.BaseEventLoop.time

_monotonic = time.monotonic

# Largest |delay| in ms the core accepts, kept a hair inside its bound.
_LIMIT_MS = float(MAX_DELAY_MS - 1)

_task_postpone = TimerTask.postpone


def _delay_ms(value: object, name: str) -> float:
    """Seconds -> milliseconds as a float, clamped to the core's range."""
    try:
        delay_ms = value * 1000.0  # type: ignore[operator]
    except TypeError:
        raise TypeError(f"{name} must be a number of seconds, got {value!r}") from None
    if not isinstance(delay_ms, float):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if -_LIMIT_MS <= delay_ms <= _LIMIT_MS:
        return delay_ms
    if math.isnan(delay_ms):
        raise ValueError(f"{name} must not be NaN, got {value!r}")
    return _LIMIT_MS if delay_ms > 0 else -_LIMIT_MS


def _when_ns(when: float) -> int:
    """The first nanosecond at or after loop time ``when`` (seconds).

    The ceiling of the exact product ``when * 10**9``: ``math.ceil(when *
    1e9)`` takes the ceiling of the rounded product, which can be below the
    exact one, and ``when()`` then read 1 ulp before ``when``.
    """
    try:
        num, den = when.as_integer_ratio()
    except (AttributeError, OverflowError, ValueError):  # inf, nan, odd types
        return math.ceil(when * 1e9)
    return -((-num * 1_000_000_000) // den)


def _pin_deadline(task: TimerTask, when: float, wheel: TimerCore) -> None:
    """Make ``when`` (loop seconds) the task's exact deadline, as asyncio keeps it.

    The add computed it from a clock read plus ``when - now``, a little
    later; with ``when`` itself, equal deadlines are ties, run in the order
    they were scheduled.  If the thread was preempted between the two reads
    long enough for the add to land in a later tick than ``when``'s, the
    task is added again (one more than 4 s in the past keeps its own).
    """
    deadline = _when_ns(when)
    for _ in range(3):
        try:
            task.deadline_ns = deadline
        except (ValueError, OverflowError):
            return
        if deadline > (task.expiration_ms - wheel.tick_ms) * 1_000_000:
            return
        if task.state == "expired":
            return  # due: it runs on the next iteration, in deadline order
        if not _task_postpone(task, (deadline - wheel.now_ns) / 1e6):
            return
    # A deadline a few hundred ns before a tick boundary: each postpone
    # (a clock read plus a delay) lands past it again.  The task then runs
    # one tick late, but it still reports ``when`` and sorts by it.
    try:
        task.deadline_ns = deadline
    except (ValueError, OverflowError):
        pass


def _uses_monotonic_clock(loop: asyncio.AbstractEventLoop) -> bool:
    """True if ``loop.time()`` reads CLOCK_MONOTONIC, so the wheel may read it in C.

    asyncio's loops and the tickwheel loop over uvloop return
    ``time.monotonic()``.  uvloop returns libuv's cached ``uv_now()``:
    CLOCK_MONOTONIC (or its coarse variant) in whole milliseconds, updated
    once per iteration, so it never runs ahead of ``time.monotonic_ns()``; a
    timer armed for loop time t therefore fires when the wheel's clock has
    reached t too.  Any other loop (e.g. a test loop with virtual time) is
    read through ``loop.time()``.
    """
    loop_time = getattr(type(loop), "time", None)
    if loop_time is _BaseEventLoop_time or loop_time is _monotonic:
        return True
    return _reads_cached_clock(type(loop))


def _reads_cached_clock(loop_class: type) -> bool:
    """True if ``loop_class.time()`` is uvloop's (libuv's cached clock)."""
    # uvloop.Loop, or a subclass keeping its time().
    owner = next((k for k in loop_class.__mro__ if "time" in vars(k)), object)
    return owner.__module__.split(".")[0] == "uvloop"


def _is_uvloop(loop: asyncio.AbstractEventLoop) -> bool:
    """True if the loop's timers are uvloop's (1 ms resolution)."""
    return any(k.__module__.split(".")[0] == "uvloop" for k in type(loop).__mro__)
