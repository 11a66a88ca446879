"""The thread-role tables in timer.py's header, checked against timer.py's code.

Each table row names functions and attributes of ``SystemTimer``; these
tests read the rows from the module docstring and the facts from the source's
syntax tree, so renaming a condition, adding a notify or touching a flag from
a new function fails here until the table says so too.
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from tickwheel import timer

# Functions that set the state up before any thread exists (or, after a
# fork, while none does): outside the protocol the tables describe.
_SETUP = {"__init__", "_init_sync", "_reinit_after_fork"}
_CONDITIONS = {"_cond", "_work_cond", "_reaper_cond"}


def _table(header: str) -> list[list[str]]:
    """Rows of the Markdown table whose header row is ``header``."""
    lines = (timer.__doc__ or "").splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    assert rows, header
    return rows


def _names(cell: str) -> set[str]:
    return set(re.findall(r"`(\w+)`", cell))


def _methods() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(inspect.getsource(timer))
    (mixin,) = (
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == "SystemTimer"
    )
    return {f.name: f for f in mixin.body if isinstance(f, ast.FunctionDef)}


def _self_attrs(func: ast.AST, store: bool | None = None) -> set[str]:
    """Attributes ``self.x`` used in ``func`` (only assigned ones if store)."""
    found = set()
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and (store is None or isinstance(node.ctx, ast.Store) == store)
        ):
            found.add(node.attr)
    return found


def _calls(func: ast.AST, method: str) -> list[ast.expr]:
    """The receivers of every ``<receiver>.<method>(...)`` call in ``func``."""
    return [
        node.func.value
        for node in ast.walk(func)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in (method, f"{method}_all")
    ]


ROLES = _table("| role | loop | exists when | waits on | woken by |")
STATE = _table("| state | written by | read by | guarded by |")


def _core_writers(cell: str) -> set[str]:
    """The names in a "written by" cell that are the core's functions (the
    time keeper's steps, compiled), written ``(the core's)``."""
    if not cell.endswith("(the core's)"):
        return set()
    names = _names(cell)
    assert all(callable(getattr(timer.core, name, None)) for name in names), cell
    return names


def test_timer_roles_every_name_in_the_tables_is_in_the_code():
    methods = _methods()
    attrs = set().union(*(_self_attrs(f) for f in methods.values()))
    module_names = set(vars(timer)) | set().union(*(_core_writers(r[1]) for r in STATE))
    rows = ROLES + STATE + _table("| executor | reaper | keeps time | runs the tasks |")
    for row in rows:
        for name in _names(" ".join(row)):
            assert name in methods or name in attrs or name in module_names, name


@pytest.mark.parametrize("row", ROLES, ids=[row[0] for row in ROLES])
def test_timer_roles_each_loop_waits_on_its_condition_only(row):
    methods = _methods()
    (loop,) = _names(row[1])
    (cond,) = _names(row[3])
    func = methods[loop]
    assert _calls(func, "wait"), f"{loop} never waits"
    assert _self_attrs(func) & _CONDITIONS == {cond}


def test_timer_roles_only_the_loops_in_the_table_wait():
    loops = {name for row in ROLES for name in _names(row[1])}
    # _sleep waits on the condition its caller (a loop) passes in.
    waiting = {
        name
        for name, func in _methods().items()
        if _calls(func, "wait") and name != "_sleep"
    }
    assert waiting == loops


def test_timer_roles_the_notifies_are_exactly_the_woken_by_cells():
    table = {
        (waker, cond)
        for row in ROLES
        for cond in _names(row[3])
        for waker in _names(row[4])
    }
    code = set()
    for name, func in _methods().items():
        for receiver in _calls(func, "notify"):
            assert (
                isinstance(receiver, ast.Attribute)
                and isinstance(receiver.value, ast.Name)
                and receiver.value.id == "self"
            ), f"{name} notifies {ast.unparse(receiver)}, not a condition by name"
            code.add((name, receiver.attr))
    assert code == table


@pytest.mark.parametrize("row", STATE, ids=[row[0] for row in STATE])
def test_timer_roles_state_is_touched_by_the_functions_in_its_row(row):
    (attr,) = _names(row[0])
    writers, readers = _names(row[1]) - _core_writers(row[1]), _names(row[2])
    methods = _methods()
    touching = {
        name
        for name, func in methods.items()
        if name not in _SETUP and attr in _self_attrs(func)
    }
    assert touching == writers | readers
    assigning = {
        name
        for name, func in methods.items()
        if name not in _SETUP and attr in _self_attrs(func, store=True)
    }
    # A container (_batches) or a lock (_handover) is mutated through calls,
    # never reassigned; every other attribute's writers are its assigners.
    if attr not in ("_batches", "_handover"):
        assert assigning == writers
    else:
        assert not assigning
