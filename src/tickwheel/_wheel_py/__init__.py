"""Pure-Python twin of :mod:`tickwheel._wheel` (same names, same behaviour).

This module is the reference implementation and the type source for the
compiled core; :mod:`tickwheel._impl` picks it when the extension is missing,
on PyPy, or when ``TICKWHEEL_NO_EXTENSIONS=1``.  Read ``_wheel.pxd`` for the
design picture; in short:

* A :class:`TimerTaskList` (a *bucket*) is a circular doubly-linked list with
  a sentinel root, so linking and unlinking a node is O(1).
* A :class:`TimingWheel` is ``wheel_size`` buckets of ``tick_ms`` each; a
  deadline too far for it goes to a lazily created overflow wheel whose tick
  is this wheel's whole interval.  Adding costs O(levels).
* The :class:`DelayQueue` orders *buckets*, not tasks, so the driver wakes
  once per due time slot, not once per task.
* :class:`TimerCore` is the part of a timer that must be fast: it turns a delay
  into a tick-aligned expiration, inserts, cancels and expires.  It never
  calls user code except in :meth:`TimerCore._run`, the one place that runs
  expired tasks and routes their exceptions to one handler.

Unlike Kafka, a :class:`TimerTask` *is* its own list node (it subclasses
:class:`TimerTaskEntry`): one object per timer instead of two.

Thread safety: the extension's mutations are C code that never runs Python
code half-way, so the GIL serialises them.  This twin takes one re-entrant
lock, shared by its units, for the same effect.

The twin is split by concern as the compiled core is (docs/design.md,
"Source layout of the compiled core"), one module per ``_wheel_*.pxi``
unit; this package holds none of the code and exports the names:

======================  =====================================================
:mod:`.checks`          constants, task states, the lock, argument checks
:mod:`.task`            TaskCounter, TimerTaskEntry, TimerTask, TimerTaskList
:mod:`.queue`           DelayQueue (the heap of buckets)
:mod:`.levels`          TimingWheel (one level)
:mod:`.place`           a task's expiration and deadline, and its placement
:mod:`.expiry`          polling due buckets, running expired tasks
:mod:`.precascade`      moving an overflow bucket's tasks down early
:mod:`.loop`            _LoopHandle and the asyncio layer's hooks
:mod:`.keeper`          the steps of SystemTimer's thread that keeps time
:mod:`.core`            TimerCore
======================  =====================================================
"""

from __future__ import annotations

import threading

from . import checks, core, expiry, levels, place, precascade, queue, task
from .checks import (
    DEFAULT_TICK_MS,
    DEFAULT_WHEEL_SIZE,
    MAX_DELAY_MS,
)
from .checks import PRECASCADE_CHUNK as PRECASCADE_CHUNK
from .core import TimerCore
from .keeper import _keep_time as _keep_time
from .keeper import _poll_counted as _poll_counted
from .keeper import _precascade_chunk as _precascade_chunk
from .levels import TimingWheel
from .levels import _in_expiration_order as _in_expiration_order
from .loop import _LoopHandle as _LoopHandle
from .loop import _use_loop_handles as _use_loop_handles
from .queue import DelayQueue
from .task import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList

__all__ = [
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "MAX_DELAY_MS",
    "DelayQueue",
    "TaskCounter",
    "TimerCore",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
]

_UNITS = (checks, place, task, queue, levels, expiry, precascade, core)


def _renew_lock() -> None:
    """Give the twin a new lock: in a forked child, a thread of the parent
    (gone there) may hold the old one forever."""
    lock = threading.RLock()
    for unit in _UNITS:
        if hasattr(unit, "_LOCK"):
            setattr(unit, "_LOCK", lock)
