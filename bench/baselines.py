"""The timers tickwheel is compared with, each behind the same tiny API.

Every implementation offers ``schedule(delay_ms, fn) -> handle`` and
``cancel(handle)`` plus ``close()``, so a benchmark loop pays one Python call
per operation whatever it measures.  ``HeapTimer`` is the timer people write
with :mod:`heapq`: push a ``[deadline, seq, fn]`` entry, cancel by turning it
into a tombstone (``fn = None``) that stays in the heap until popped.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import sched
import time
from collections.abc import Callable
from typing import Any

try:  # pragma: no cover - optional
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None


class HeapTimer:
    """heapq timer: (deadline, seq, fn) push, tombstone cancel."""

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()

    def schedule(self, delay_ms: float, fn: Callable[[], Any]) -> list[Any]:
        entry = [time.monotonic() + delay_ms * 0.001, next(self._seq), fn]
        heapq.heappush(self._heap, entry)
        return entry

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        entry[2] = None

    def close(self) -> None:
        self._heap.clear()


class LoopTimer:
    """asyncio (or uvloop) ``loop.call_later`` / ``handle.cancel``, loop not running."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # The unbound method: what ``handle.cancel()`` calls, minus the lookup.
        probe = loop.call_later(1, print)
        probe.cancel()
        self.cancel = type(probe).cancel

    def schedule(self, delay_ms: float, fn: Callable[[], Any]) -> Any:
        return self.loop.call_later(delay_ms * 0.001, fn)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        for handle in getattr(self.loop, "_scheduled", ()):
            handle.cancel()
        if hasattr(self.loop, "_scheduled"):
            self.loop._scheduled.clear()
        self.loop.close()


class SchedTimer:
    """``sched.scheduler.enter`` / ``cancel`` (cancel is O(n) in the stdlib)."""

    def __init__(self) -> None:
        self.s = sched.scheduler(time.monotonic)

    def schedule(self, delay_ms: float, fn: Callable[[], Any]) -> Any:
        return self.s.enter(delay_ms * 0.001, 0, fn)

    def cancel(self, event: Any) -> None:
        self.s.cancel(event)

    def close(self) -> None:
        self.s._queue.clear()  # type: ignore[attr-defined]


class WheelTimer:
    """tickwheel (either core) behind the same API."""

    def __init__(self, timer_cls: Any, task_cls: Any) -> None:
        self.timer = timer_cls(reaper=False)
        self.schedule = self.timer.schedule
        self.cancel = task_cls.cancel  # the unbound method, as for the others

    def close(self) -> None:
        self.timer.close()


def factories() -> dict[str, Callable[[], Any]]:
    """name -> zero-argument factory of a fresh timer."""
    from twins import twin_package

    from tickwheel import _wheel_py
    from tickwheel import timer as tw

    out: dict[str, Callable[[], Any]] = {
        "tickwheel": lambda: WheelTimer(tw.SystemTimer, tw.TimerTask),
        "tickwheel-py": lambda: WheelTimer(
            twin_package().SystemTimer, _wheel_py.TimerTask
        ),
        "heapq": HeapTimer,
        "asyncio": lambda: LoopTimer(asyncio.new_event_loop()),
        "sched": SchedTimer,
    }
    if uvloop is not None:
        out["uvloop"] = lambda: LoopTimer(uvloop.new_event_loop())
    return out


# -- manual-clock drains (W3-manual): pure CPU cost per expiry ------------------


def drain_tickwheel(
    timer_cls: Any, delays: list[int], fn: Callable[[], Any]
) -> Callable[[], int]:
    """Schedule on a MockTimer; the returned callable advances through the window."""
    timer = timer_cls()
    schedule = timer.schedule
    for d in delays:
        schedule(d, fn)
    window = max(delays)
    return lambda: timer.advance_clock(window)


def drain_heapq(delays: list[int], fn: Callable[[], Any]) -> Callable[[], int]:
    """heapq on a manual clock: pop and call whatever is due at each step."""
    heap = [[d, i, fn] for i, d in enumerate(delays)]
    heapq.heapify(heap)
    window = max(delays)

    def drain() -> int:
        pop = heapq.heappop
        now = 0
        ran = 0
        while heap:
            if heap[0][0] > now:
                now = heap[0][0]
                if now > window:
                    break
            entry = pop(heap)
            if entry[2] is not None:
                entry[2]()
                ran += 1
        return ran

    return drain


def drain_sched(delays: list[int], fn: Callable[[], Any]) -> Callable[[], int]:
    """sched.scheduler on a fake clock whose delayfunc moves time."""
    clock = [0.0]

    def delayfunc(seconds: float) -> None:
        clock[0] += seconds

    s = sched.scheduler(lambda: clock[0], delayfunc)
    for d in delays:
        s.enter(d / 1000, 0, fn)
    return lambda: s.run()


# -- the timed loops ------------------------------------------------------------
# The pytest-benchmark suite and measure.py's interleaved rounds time these
# same functions, so the two report the same work.


def loop_add(
    schedule: Callable[..., Any], delays: list[int], fn: Callable[[], Any]
) -> list[Any]:
    """W1: schedule every delay; the handles are kept (none fires)."""
    handles: list[Any] = []
    append = handles.append
    for d in delays:
        append(schedule(d, fn))
    return handles


def loop_sliding(
    schedule: Callable[..., Any],
    cancel: Callable[[Any], Any],
    delays: list[int],
    fn: Callable[[], Any],
    k: int,
) -> None:
    """W2-sliding: K pending; each add cancels the one added K adds earlier."""
    window: list[Any] = [None] * k
    for i, d in enumerate(delays):
        slot = i % k
        old = window[slot]
        if old is not None:
            cancel(old)
        window[slot] = schedule(d, fn)
