"""The checkout's files and folders are named for what they hold (STYLE.md §1).

A folder named for a work item (``bench/issue18_variants/``) tells a reader
nothing about its content once the issue is closed; the issue number belongs
in the commit message and the CHANGELOG.
"""

from __future__ import annotations

import ast
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


# A function a reader can hold on one screen (docstring, comments and blank
# lines included).
MAX_FUNCTION_LINES = 80


def _long_functions(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    functions = sorted(
        (node.lineno, node.end_lineno - node.lineno + 1, node.name)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
    )
    return [
        f"{path.relative_to(root)}:{line} {name} ({length} lines)"
        for line, length, name in functions
        if length > MAX_FUNCTION_LINES
    ]


def test_no_python_function_in_src_is_longer_than_a_screen() -> None:
    sources = sorted((ROOT / "src").rglob("*.py"))
    assert len(sources) > 20  # the scan sees the package
    long = [found for path in sources for found in _long_functions(path)]
    assert long == []


def test_the_length_scan_counts_each_function_whole(tmp_path: Path) -> None:
    # From the def line to the body's last line; methods and nested
    # functions are measured too.
    def body(lines: int, indent: str) -> str:
        return "".join(f"{indent}x = {i}\n" for i in range(lines))

    source = (
        "def fits():\n" + body(MAX_FUNCTION_LINES - 1, "    ")
        + "class C:\n"
        + "    async def method(self):\n" + body(MAX_FUNCTION_LINES, "        ")
        + "def outer():\n"
        + "    def inner():\n" + body(MAX_FUNCTION_LINES, "        ")
    )
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    lines = MAX_FUNCTION_LINES + 1
    assert _long_functions(path, tmp_path) == [
        f"m.py:{MAX_FUNCTION_LINES + 2} method ({lines} lines)",
        f"m.py:{2 * MAX_FUNCTION_LINES + 3} outer ({lines + 1} lines)",
        f"m.py:{2 * MAX_FUNCTION_LINES + 4} inner ({lines} lines)",
    ]
