"""Choose the compiled core (``_wheel``) or its pure-Python twin (``_wheel_py``).

``TICKWHEEL_NO_EXTENSIONS=1`` (or any non-CPython interpreter) selects the twin.
Types always come from the twin, which is fully annotated.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import TYPE_CHECKING

NO_EXTENSIONS = (
    os.environ.get("TICKWHEEL_NO_EXTENSIONS", "") not in ("", "0")
    or sys.implementation.name != "cpython"
)

if TYPE_CHECKING or NO_EXTENSIONS:
    from . import _wheel_py as core
    from ._wheel_py import (
        DEFAULT_TICK_MS,
        DEFAULT_WHEEL_SIZE,
        MAX_DELAY_MS,
        DelayQueue,
        TaskCounter,
        TimerCore,
        TimerTask,
        TimerTaskEntry,
        TimerTaskList,
        TimingWheel,
    )

    USE_EXTENSIONS = False
else:
    try:
        from . import _wheel as core
        from ._wheel import (
            DEFAULT_TICK_MS,
            DEFAULT_WHEEL_SIZE,
            MAX_DELAY_MS,
            DelayQueue,
            TaskCounter,
            TimerCore,
            TimerTask,
            TimerTaskEntry,
            TimerTaskList,
            TimingWheel,
        )

        USE_EXTENSIONS = True
    except ImportError:  # pragma: no cover - exercised by the pure-Python CI job
        from . import _wheel_py as core
        from ._wheel_py import (
            DEFAULT_TICK_MS,
            DEFAULT_WHEEL_SIZE,
            MAX_DELAY_MS,
            DelayQueue,
            TaskCounter,
            TimerCore,
            TimerTask,
            TimerTaskEntry,
            TimerTaskList,
            TimingWheel,
        )

        USE_EXTENSIONS = False


def select(name: str) -> types.ModuleType:
    """The compiled module ``tickwheel.<name>`` or, without extensions, its twin.

    The twin is ``tickwheel.<name>_py``, with the same names (e.g.
    ``select("spark._replay")`` is ``tickwheel.spark._replay`` or
    ``tickwheel.spark._replay_py``).
    """
    suffix = "" if USE_EXTENSIONS else "_py"
    return importlib.import_module(f"tickwheel.{name}{suffix}")


__all__ = [
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "MAX_DELAY_MS",
    "NO_EXTENSIONS",
    "USE_EXTENSIONS",
    "DelayQueue",
    "TaskCounter",
    "TimerCore",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "core",
    "select",
]
