"""The compiled core's installed methods match their table and class bodies.

Five methods of ``tickwheel._wheel`` run as C functions written into their
type's dict at import (the table at the end of ``_wheel.pyx``), not as the
class body's ``def`` of the same name.  A reader of the class body is told so
at each such ``def``; these tests hold the table, the types and those notes
to one another, so a method installed without a note, or a note left on a
method no longer installed, fails here.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.c_extension

SRC = Path(__file__).resolve().parents[1] / "src" / "tickwheel"
NOTE = re.compile(
    r"^    # Installed: runs (\w+) \((\w+\.pxi)\),\n(?:    #.*\n)*    def (\w+)\(", re.M
)


def _table() -> tuple[tuple[str, str, str], ...]:
    from tickwheel import _wheel

    return _wheel._installed_methods()  # type: ignore[attr-defined,no-any-return]


def _notes() -> dict[tuple[str, str], tuple[str, str]]:
    """(class, method) -> (C function, unit) for every note in the units."""
    notes = {}
    for unit in sorted(SRC.glob("_wheel_*.pxi")):
        text = unit.read_text(encoding="utf-8")
        for match in NOTE.finditer(text):
            cls = re.findall(r"^cdef class (\w+)", text[: match.start()], re.M)[-1]
            notes[(cls, match.group(3))] = (match.group(1), match.group(2))
    return notes


def test_installed_methods_table_lists_the_five() -> None:
    names = {(cls, name) for cls, name, _ in _table()}
    assert names == {
        ("TimerCore", "schedule"),
        ("TimerCore", "schedule_as"),
        ("TimerCore", "_loop_call_later"),
        ("TimerCore", "_loop_call_at"),
        ("TimerTask", "cancel"),
    }


@pytest.mark.parametrize("entry", range(5))
def test_installed_method_is_a_c_descriptor_with_the_table_signature(
    entry: int,
) -> None:
    from tickwheel import _wheel

    cls_name, name, signature = _table()[entry]
    method = vars(getattr(_wheel, cls_name))[name]
    assert type(method).__name__ == "method_descriptor", (cls_name, name, method)
    assert method.__text_signature__ == f"({signature})"
    assert method.__doc__.strip(), f"{cls_name}.{name} lost its docstring"
    params = list(inspect.signature(method).parameters)
    assert params[0] == "self"


def test_every_installed_method_has_a_note_in_its_class_body() -> None:
    notes = _notes()
    table = {(cls, name) for cls, name, _ in _table()}
    assert set(notes) == table
    for (cls, name), (cfunc, unit) in notes.items():
        text = (SRC / unit).read_text(encoding="utf-8")
        assert re.search(rf"^cdef object {cfunc}\(", text, re.M), (
            f"{cls}.{name}'s note names {cfunc} in {unit}, which does not define it"
        )
    install = (SRC / "_wheel.pyx").read_text(encoding="utf-8")
    for (cls, name), (cfunc, _) in notes.items():
        assert re.search(rf'"{name}",\s*<void \*>{cfunc}\b', install), (
            f"_wheel.pyx does not install {cfunc} as {cls}.{name}"
        )
