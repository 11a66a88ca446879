"""The public API as a user's program and help() see it (issue 29).

mypy --strict:

``tests/typing/reveal_public.py`` uses every public context manager and
factory; each ``reveal_type`` there carries the type mypy must infer in a
comment.  mypy reads tickwheel's own annotations (the pure-Python twins are
the type source, ``py.typed`` ships with the package), so a ``-> Any`` that
loses a type, or an ``__enter__`` that returns the base class to a subclass,
fails here.  Then what ``dir()`` and ``help()`` show: public names only, and
public types in the signatures.
"""

from __future__ import annotations

import inspect
import os
import re
import types
from pathlib import Path

import pytest

import tickwheel

SNIPPET = Path(__file__).parent / "typing" / "reveal_public.py"
REVEALED = re.compile(r'^[^:]+:(\d+): note: Revealed type is "(.*)"$')


def _expected() -> dict[int, str]:
    lines = SNIPPET.read_text(encoding="utf-8").splitlines()
    return {
        number: line.rpartition("  # ")[2]
        for number, line in enumerate(lines, 1)
        if line.lstrip().startswith("reveal_type(")
    }


def test_mypy_reveals_the_public_types(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    package_parent = Path(tickwheel.__file__).resolve().parents[1]
    if package_parent.name == "src":  # a checkout (editable install)
        monkeypatch.setenv("MYPYPATH", str(package_parent))
    monkeypatch.chdir(SNIPPET.parent)  # the snippet's module is reveal_public
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            os.fspath(tmp_path / "cache"),
            SNIPPET.name,
        ]
    )
    assert stderr == ""
    revealed = {}
    errors = []
    for line in stdout.splitlines():
        match = REVEALED.match(line)
        if match:
            revealed[int(match[1])] = match[2]
        else:
            errors.append(line)
    assert errors == [] and status == 0
    expected = _expected()
    assert len(expected) >= 19 and sorted(revealed) == sorted(expected)
    for number, want in expected.items():
        assert want in revealed[number], f"line {number}: {revealed[number]}"
        assert "Any" not in revealed[number] or want == "sched.Event", number


def test_dir_lists_only_public_names_and_submodules():
    # "annotations" (a `from __future__ import annotations`) was listed.
    public = {name for name in dir(tickwheel) if not name.startswith("_")}
    modules = {
        name
        for name in public
        if isinstance(getattr(tickwheel, name), types.ModuleType)
    }
    assert public - modules == set(tickwheel.__all__) - {"__version__"}


def test_system_timer_signature_names_the_accepted_executors():
    # help(SystemTimer) showed `executor: 'Executor' = None` (a private alias).
    executor = inspect.signature(tickwheel.SystemTimer).parameters["executor"]
    assert "Literal['inline']" in str(executor.annotation)
    assert "concurrent.futures.Executor" in str(executor.annotation)


@pytest.mark.parametrize("cls", [tickwheel.SystemTimer, tickwheel.MockTimer])
def test_timers_list_no_driver_hooks(cls):
    # help(SystemTimer) listed the core's driver hooks `take_ready` and
    # `poll`: calling them from user code steals due tasks from the thread
    # keeping time.  They are private now; docs/api.md names the rest.
    public = {name for name in dir(cls) if not name.startswith("_")}
    assert {"take_ready", "poll"} & public == set()
    api = Path(__file__).parents[1].joinpath("docs", "api.md").read_text()
    undocumented = {n for n in public if f"`{n}" not in api and f".{n}" not in api}
    assert undocumented == set(), undocumented
