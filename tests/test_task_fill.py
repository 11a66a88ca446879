"""TW_TASK_FILL initialises every field of a TimerTask, and its check says so.

``_made_task`` (``_wheel_alloc.pxi``) takes unzeroed memory and writes each
field of TimerTaskEntry and TimerTask with the ``TW_TASK_FILL`` macro
(``_wheel_struct.h``).  ``TW_TASK_FILL_CHECK`` stops the build unless the
fields it lists follow the object header back to back and end the struct, so
a field added to ``_wheel.pxd`` breaks the build until it is listed there.
These tests keep that list, the macro and the declared fields the same.
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tickwheel"


def _fields(cls: str) -> list[str]:
    """The C fields of one cdef class in _wheel.pxd, in declaration order."""
    pxd = (SRC / "_wheel.pxd").read_text(encoding="utf-8")
    body = re.search(rf"^cdef class {cls}\b.*?:\n((?:    .*\n|\s*\n)*)", pxd, re.M)
    assert body, f"no cdef class {cls} in _wheel.pxd"
    return re.findall(r"^    cdef [\w ]+?\**(\w+)\s*(?:#.*)?$", body.group(1), re.M)


def _macro(name: str) -> str:
    header = (SRC / "_wheel_struct.h").read_text(encoding="utf-8")
    match = re.search(rf"#define {name}\(.*?(?<!\\)\n", header, re.S)
    assert match, f"no {name} in _wheel_struct.h"
    return match.group(0)


def test_pxd_fields_are_parsed() -> None:
    assert _fields("TimerTaskEntry") == ["_expiration_ms", "_prev", "_next", "_list"]
    assert _fields("TimerTask")[:2] == ["_fn", "_args"]


def test_task_fill_writes_every_field() -> None:
    fill = _macro("TW_TASK_FILL")
    written = re.findall(r"t_->(?:__pyx_base\.)?(\w+) =", fill)
    assert written == _fields("TimerTaskEntry") + _fields("TimerTask")


def test_task_fill_check_chains_every_field_in_order() -> None:
    check = _macro("TW_TASK_FILL_CHECK")
    named = re.findall(
        r"TW_(?:NEXT_TO|END_OF)\(TW_(ENTRY|TASK)_T, (\w+)(?:, (\w+))?\)", check
    )
    entry = [f for kind, a, b in named if kind == "ENTRY" for f in (a, b) if f]
    task = [f for kind, a, b in named if kind == "TASK" for f in (a, b) if f]
    assert list(dict.fromkeys(entry)) == _fields("TimerTaskEntry")
    assert list(dict.fromkeys(task)) == _fields("TimerTask")
    # Starts right after the object header, ends at the end of each struct.
    assert "offsetof(TW_ENTRY_T, _expiration_ms) == sizeof(PyObject)" in check
    last_entry, last_task = _fields("TimerTaskEntry")[-1], _fields("TimerTask")[-1]
    assert f"TW_END_OF(TW_ENTRY_T, {last_entry}) == sizeof(TW_ENTRY_T)" in check
    assert "offsetof(TW_TASK_T, _fn) == sizeof(TW_ENTRY_T)" in check
    assert f"TW_END_OF(TW_TASK_T, {last_task}) == sizeof(TW_TASK_T)" in check
