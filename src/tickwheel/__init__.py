"""tickwheel: Kafka's hierarchical timing wheel for Python, with a Cython core.

>>> from tickwheel import MockTimer
>>> timer = MockTimer()
>>> task = timer.schedule(30, print, "fired at 30 ms")
>>> timer.advance_clock(30)
fired at 30 ms
True
"""

# No "from __future__ import annotations": it would be a public name here
# (dir(tickwheel) listed "annotations"), and nothing below is annotated.
from ._impl import (
    DEFAULT_TICK_MS,
    DEFAULT_WHEEL_SIZE,
    MAX_DELAY_MS,
    USE_EXTENSIONS,
    DelayQueue,
    TaskCounter,
    TimerTask,
    TimerTaskEntry,
    TimerTaskList,
    TimingWheel,
)
from ._version import __version__
from .compat_sched import scheduler
from .compat_threading import Timer
from .purgatory import CountdownOperation, DelayedOperation, DelayedOperationPurgatory
from .timer import MockTimer, SystemTimer

__all__ = [
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "MAX_DELAY_MS",
    "USE_EXTENSIONS",
    "CountdownOperation",
    "DelayQueue",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "MockTimer",
    "SystemTimer",
    "TaskCounter",
    "Timer",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "__version__",
    "scheduler",
]
