"""mypy --strict over the public API as a user's program sees it (issue 29).

``tests/typing/reveal_public.py`` uses every public context manager and
factory; each ``reveal_type`` there carries the type mypy must infer in a
comment.  mypy reads tickwheel's own annotations (the pure-Python twins are
the type source, ``py.typed`` ships with the package), so a ``-> Any`` that
loses a type, or an ``__enter__`` that returns the base class to a subclass,
fails here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import tickwheel

api = pytest.importorskip("mypy.api")

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
