"""The checkout's files and folders are named for what they hold (STYLE.md §1).

A folder named for a work item (``bench/issue18_variants/``) tells a reader
nothing about its content once the issue is closed; the issue number belongs
in the commit message and the CHANGELOG.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ISSUE_NAME = re.compile(r"issue[-_]?\d+", re.IGNORECASE)


def test_no_path_is_named_for_an_issue() -> None:
    named = [
        str(path.relative_to(ROOT))
        for top in ("bench", "docs", "src", "tests", ".ci", ".github")
        if (ROOT / top).exists()
        for path in (ROOT / top).rglob("*")
        if ISSUE_NAME.search(path.name)
    ]
    assert named == []


def test_the_public_api_variants_are_linked_where_they_are() -> None:
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    assert "](../bench/public_api_variants/README.md)" in design
    assert (ROOT / "bench" / "public_api_variants" / "README.md").is_file()


def test_compiled_core_sources_fit_in_a_thousand_lines() -> None:
    # _wheel.pyx and _purgatory.pyx include one .pxi unit per concern
    # (docs/design.md, "Source layout of the compiled core").
    package = ROOT / "src" / "tickwheel"
    sources = [
        path
        for pattern in ("_wheel*.p*", "_purgatory*.p*", "_kafka.p*", "*.h")
        for path in package.glob(pattern)
        if path.suffix in (".pyx", ".pxi", ".pxd", ".h")
    ]
    assert len(sources) >= 20, sorted(p.name for p in sources)
    long = {
        path.name: n
        for path in sources
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 1000
    }
    assert long == {}
