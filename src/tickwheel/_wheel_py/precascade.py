"""The twin's precascade: moving an overflow bucket's tasks down early.

Mirrors ``_wheel_precascade.pxi`` (TimerCore.precascade and
next_precascade_ms).  Callers hold the twin's lock.
"""

from __future__ import annotations

from typing import Any

from .checks import _NS_PER_MS
from .levels import TimingWheel
from .place import _expire
from .task import TimerTaskList

# A TimerCore, typed Any here: the core's module imports this one.
_Core = Any


def _next_precascade(core: _Core) -> int | None:
    """When precascade() may next find work (ms, after now), or None."""
    now_ms = core.now_ns // _NS_PER_MS
    lower: TimingWheel = core._wheel
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
                bucket is core._pc_bucket
                and expiration == core._pc_expiration
                and core._pc_left <= 0
                and core._pc_horizon >= 0
            ):
                step = span // 8 if span >= 8 else 1
                need = max(need, core._pc_horizon + step)
            # The lower level's horizon at t: t to its tick, plus its reach.
            tick = lower._tick_ms
            at = -((lower._interval_ms - need) // tick) * tick
            if at > now_ms and (best is None or at < best):
                best = at
        lower = wheel
        wheel = wheel._overflow
    return best


def _precascade(core: _Core, budget: int) -> int:
    """Up to ``budget`` tasks of the chosen overflow bucket looked at."""
    lower: TimingWheel = core._wheel
    wheel = lower._overflow
    best: TimerTaskList | None = None
    best_horizon = best_span = best_expiration = 0
    now_ms = core.now_ns // _NS_PER_MS
    head = core._queue.next_expiration_ms
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
    if best is not core._pc_bucket or best_expiration != core._pc_expiration:
        core._pc_bucket = best
        core._pc_expiration = best_expiration
        core._pc_left = 0
        core._pc_horizon = -1
    if core._pc_left <= 0:
        step = best_span // 8 if best_span >= 8 else 1
        if core._pc_horizon >= 0 and best_horizon - core._pc_horizon < step:
            return 0
        core._pc_left = best._size
        core._pc_horizon = best_horizon
    n = min(budget, core._pc_left)
    root = best._root
    looked = 0
    while looked < n:
        node = root._next
        if node is root:
            core._pc_left = 0
            break
        assert node is not None
        best._unlink(node)
        # Lands lower if it fits, else back at this bucket's tail (the
        # level's clock has not moved, so its slot is the same one).
        if not core._wheel._add(node):
            _expire(core, node)
            core._ready.append(node)
        looked += 1
    core._pc_left -= looked
    return looked
