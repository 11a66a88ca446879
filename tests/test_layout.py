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

