"""The twin's placement: where every new or re-added task is placed.

Mirrors ``_wheel_place.pxi``: :func:`_expiration_of` is the one place that
computes a task's expiration and deadline, :func:`_add` the one route that
places a task (``add``, ``schedule``, ``schedule_as``, ``postpone``), and
:func:`_place` links it into the wheel or makes it ready.  Callers hold the
twin's lock.
"""

from __future__ import annotations

from typing import Any

from .checks import (
    _EXPIRED,
    _MAX_EARLY_NS,
    _MAX_EXPIRATION_MS,
    _NS_PER_MS,
    _PENDING,
    _past_clock_end,
)

# A TimerCore and a TimerTask, typed Any here: their modules (core, task)
# import this one, which imports nothing above it.
_Core = Any
_Task = Any


def _expiration_of(core: _Core, now_ns: int, delay_ns: int) -> tuple[int, int]:
    """A task's expiration (ms) ``delay_ns`` after the clock reading ``now_ns``,
    and how far its exact deadline (now_ns + delay_ns) lies before it.

    The deadline rounded up to the millisecond, then up to the tick: never
    early.  Over _MAX_EXPIRATION_MS the deadline is past the end of the
    clock's range: the caller refuses it (_past_clock_end, naming its
    argument) before anything moves.
    """
    deadline_ns = now_ns + delay_ns
    expiration = -((-deadline_ns) // _NS_PER_MS)
    tick = core._tick_ms
    expiration = -((-expiration) // tick) * tick
    # Clamped to the compiled core's 32-bit field.
    return expiration, min(expiration * _NS_PER_MS - deadline_ns, _MAX_EARLY_NS)


def _add(core: _Core, task: _Task, now_ns: int, delay_ns: int, fresh: bool) -> bool:
    """Place ``task`` ``delay_ns`` after ``now_ns``, a reading of the timer's clock.

    A pending or expired task is moved (the count is unchanged); ``fresh``:
    the caller just made the task, so the checks of a re-add are skipped.

    :return: True when the driver must wake (the task is ready, or its
        bucket became the queue's head)
    """
    if core._closed:
        raise RuntimeError("timer is closed")
    if not fresh and task._spent:
        raise RuntimeError(
            f"{task!r} has run or been cancelled and released its callable; "
            "schedule a new task"
        )
    # Refused before anything moves (a re-added task stays put).
    expiration, early = _expiration_of(core, now_ns, delay_ns)
    if expiration > _MAX_EXPIRATION_MS:
        _past_clock_end(task._delay_ms, now_ns // _NS_PER_MS)
    state = task._state
    if not fresh and (state == _PENDING or state == _EXPIRED):
        owner = task._list
        if owner is not None and owner._counter is not core._counter:
            raise ValueError(f"{task!r} is pending in another timer")
        if state == _PENDING:
            if owner is not None:
                owner._unlink(task)
        else:
            core._counter.value -= 1
            task._list = None
            # A due task re-added before it ran leaves the ready list, so it
            # is never listed twice (a stale entry would run it ahead of
            # tasks due before it once it came due again).
            ready = core._ready
            for i in range(len(ready) - 1, -1, -1):
                if ready[i] is task:
                    del ready[i]
                    break
    task._expiration_ms = expiration
    task._early_ns = early
    task._state = _PENDING
    return _place(core, task, now_ns, expiration)


def _place(core: _Core, task: _Task, now_ns: int, expiration: int) -> bool:
    """Link ``task`` into the wheel, or make it ready if due; True: wake."""
    before = len(core._queue._heap)
    # "Due" is judged on the timer's clock: the wheel's own clock only
    # moves when a bucket is polled and may lag behind it.
    if expiration * _NS_PER_MS > now_ns and core._wheel._add(task):
        heap = core._queue._heap
        return len(heap) > before and heap[0][2] is task._list
    _expire(core, task)
    core._ready.append(task)
    return True


def _expire(core: _Core, task: _Task) -> None:
    # Due: counted, off the wheel, pointing at the timer's (never linked)
    # expired bucket, so that running or cancelling it still finds the count.
    task._state = _EXPIRED
    task._list = core._expired
    core._counter.value += 1
