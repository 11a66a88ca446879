"""The one place that chooses the compiled modules or their pure-Python twins.

Every compiled module has a twin with the same names, signatures and
docstrings (``tests/test_twin_parity.py``); the twin is the readable
reference and the fallback, and the type source (the ``.pyx`` files ship no
``.pyi``; ``__init__.pyi`` gives the twins' classes their public names, see
below).  Dependencies point down, compiled and pure alike::

    _wheel.pyx      / _wheel_py/          timing wheel, TimerTask, TimerCore
    _purgatory.pyx  / _purgatory_py.py    DelayedOperation, the purgatory's hot paths
    _kafka.pyx      / _kafka_py.py        DelayedProduce's hot half (Kafka's model)
    spark/_replay.pyx / spark/_replay_py.py   the replay engine's loop

The choice is made once, here, at import, and holds for the whole process
(propcache ``_helpers.py``, multidict ``_compat.py``):

* ``NO_EXTENSIONS`` is True under ``TICKWHEEL_NO_EXTENSIONS=1`` (any value
  but ``""``/``"0"``) or on an interpreter other than CPython: every twin.
* Otherwise the compiled modules are imported, **all or nothing**.  If none
  is there (a pure-Python install) the twins are used quietly.  If some load
  and another fails (a partial or stale build, or ``_purgatory`` refusing a
  free-threaded interpreter whose GIL is off), a ``RuntimeWarning`` names
  the failure and *every* twin is used: compiled and pure classes never mix
  (a pure DelayedOperation cannot ride a compiled wheel), and the warning
  says to rebuild rather than failing an application that would run
  correctly, only slower.
* ``USE_EXTENSIONS`` says which way it went.

Public modules (``timer.py``, ``purgatory.py``, ``kafka.py``, the compat
modules) import the chosen names from here and from nowhere else; the replay
engine asks :func:`select` for its loop.  Worked example::

    >>> import tickwheel._impl as impl
    >>> impl.select("_wheel") is impl.core
    True
    >>> impl.select("_purgatory").DelayedOperation is impl.DelayedOperation
    True
"""

from __future__ import annotations

import importlib
import os
import sys
import types
import warnings
from typing import TYPE_CHECKING

NO_EXTENSIONS = (
    os.environ.get("TICKWHEEL_NO_EXTENSIONS", "") not in ("", "0")
    or sys.implementation.name != "cpython"
)

#: The compiled modules, lowest layer first (each cimports the ones before).
#: spark/_replay is not here: it needs pyspark's extra and is chosen by
#: ``select`` when the engine loads.
COMPILED = ("_wheel", "_purgatory", "_kafka")


def _import_compiled() -> bool:
    """Import every compiled module or none; True iff all of them loaded."""
    loaded: list[str] = []
    for name in COMPILED:
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ImportError as exc:
            if loaded:
                warnings.warn(
                    f"tickwheel: {', '.join(loaded)} loaded but {name} did not "
                    f"({exc}); using the pure-Python twins of all of them. "
                    "Rebuild tickwheel.",
                    RuntimeWarning,
                    stacklevel=3,
                )
            return False
        loaded.append(name)
    return True


if TYPE_CHECKING or NO_EXTENSIONS:
    USE_EXTENSIONS = False
else:
    USE_EXTENSIONS = _import_compiled()


def select(name: str) -> types.ModuleType:
    """The chosen implementation of ``tickwheel.<name>``: compiled or its twin.

    ``select("_purgatory")`` is ``tickwheel._purgatory`` when
    ``USE_EXTENSIONS`` and ``tickwheel._purgatory_py`` otherwise; dotted
    names work for subpackages (``select("spark._replay")``).

    :raises ImportError: if the chosen module cannot be imported (for a
        compiled module outside :data:`COMPILED`, a build without it)
    """
    suffix = "" if USE_EXTENSIONS else "_py"
    return importlib.import_module(f"{__package__}.{name}{suffix}")


# The chosen modules; the twins are the type source (mypy sees this branch).
if TYPE_CHECKING or not USE_EXTENSIONS:
    from . import _kafka_py as _kafka_mod
    from . import _purgatory_py as _purgatory_mod
    from . import _wheel_py as core
else:
    from . import _kafka as _kafka_mod
    from . import _purgatory as _purgatory_mod
    from . import _wheel as core

DEFAULT_TICK_MS = core.DEFAULT_TICK_MS
DEFAULT_WHEEL_SIZE = core.DEFAULT_WHEEL_SIZE
MAX_DELAY_MS = core.MAX_DELAY_MS
COMPLETED = _kafka_mod.COMPLETED
EXPIRED = _kafka_mod.EXPIRED
REQUEST_TIMED_OUT = _kafka_mod.REQUEST_TIMED_OUT
_use_loop_handles = core._use_loop_handles

if TYPE_CHECKING:
    # Type checkers name a class after the module that defines it, and the
    # twins are private.  tickwheel/__init__.pyi defines the twins' classes
    # (signatures only, written from the twins by tests/typing/make_stubs.py)
    # in the public package, so the modules importing from here annotate
    # with tickwheel.TimerTask and users see that name, never _wheel_py's.
    from . import (
        CountdownOperation,
        DelayedOperation,
        DelayQueue,
        TaskCounter,
        TimerTask,
        TimerTaskEntry,
        TimerTaskList,
        TimingWheel,
        _hash_key,
        _LoopHandle,
        _new_operation,
        _new_produce,
        _PartitionCore,
        _ProduceCore,
        _PurgatoryCore,
        _Shard,
    )
    from . import _TimerCore as TimerCore
else:
    DelayQueue = core.DelayQueue
    TaskCounter = core.TaskCounter
    TimerCore = core.TimerCore
    TimerTask = core.TimerTask
    TimerTaskEntry = core.TimerTaskEntry
    TimerTaskList = core.TimerTaskList
    TimingWheel = core.TimingWheel
    _LoopHandle = core._LoopHandle

    DelayedOperation = _purgatory_mod.DelayedOperation
    CountdownOperation = _purgatory_mod.CountdownOperation
    _PurgatoryCore = _purgatory_mod._PurgatoryCore
    _Shard = _purgatory_mod._Shard
    _hash_key = _purgatory_mod._hash_key
    _new_operation = _purgatory_mod._new_operation

    _PartitionCore = _kafka_mod._PartitionCore
    _ProduceCore = _kafka_mod._ProduceCore
    _new_produce = _kafka_mod._new_produce


__all__ = [
    "COMPILED",
    "COMPLETED",
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "EXPIRED",
    "MAX_DELAY_MS",
    "NO_EXTENSIONS",
    "REQUEST_TIMED_OUT",
    "USE_EXTENSIONS",
    "CountdownOperation",
    "DelayQueue",
    "DelayedOperation",
    "TaskCounter",
    "TimerCore",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "_PartitionCore",
    "_ProduceCore",
    "_PurgatoryCore",
    "_Shard",
    "_LoopHandle",
    "_hash_key",
    "_new_operation",
    "_new_produce",
    "core",
    "select",
]
