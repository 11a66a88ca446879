"""The checkout reads on its own: names, function sizes, and what the text cites.

* Files and folders are named for what they hold: a folder named for a work
  item tells a reader nothing about its content once the work is done; the
  work item belongs in the commit message and the CHANGELOG.
* A function fits on a screen.
* Comments, docstrings and docs say why, and cite what a reader of the
  checkout can open: no numbers of a tracker that is not in it, no paths of
  a developer's machine, no project document that does not exist.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

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


# A function a reader can hold on one screen (docstring, comments and blank
# lines included), a class a reader can hold in mind, a file of one concern.
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 400
MAX_FILE_LINES = 1000


def _long_functions(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line name (n lines)`` for each function longer than a screen
    and each class longer than MAX_CLASS_LINES, in a Python or Cython file."""
    if path.suffix in (".pyx", ".pxi", ".pxd"):
        blocks = _cython_blocks(path.read_text(encoding="utf-8"))
    else:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        blocks = [
            (
                "class" if isinstance(node, ast.ClassDef) else "function",
                node.name,
                node.lineno,
                node.end_lineno - node.lineno + 1,
            )
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.end_lineno is not None
        ]
    limit = {"class": MAX_CLASS_LINES, "function": MAX_FUNCTION_LINES}
    return [
        f"{path.relative_to(root)}:{line} {name} ({length} lines)"
        for kind, name, line, length in sorted(blocks, key=lambda b: b[2])
        if length > limit[kind]
    ]


#: The first line of a Cython class or function: ``class``/``cdef class``,
#: or ``def``/``cpdef``/``cdef`` with a return type, a name and a ``(``
#: (a ``cdef`` variable has no ``(`` after its name).
_CYTHON_HEADER = re.compile(
    r"^(?P<indent>[ ]*)(?:"
    r"(?:cdef\s+)?class\s+(?P<cls>\w+)"
    r"|(?:async\s+def|def|cpdef|cdef)\s+(?:[\w\[\]\.]+\s+|\*+\s*)*\**(?P<fn>\w+)\s*\("
    r")"
)


def _code(line: str) -> str:
    return line.split("#", 1)[0].rstrip()


def _cython_blocks(text: str) -> list[tuple[str, str, int, int]]:
    """(kind, name, line, length) of each class and function of a Cython
    source, measured as ``ast`` measures Python: from the header to the
    last line of the body (trailing comments and blank lines left out).
    A header without a colon is a declaration (a .pxd), not counted."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        head = _CYTHON_HEADER.match(line)
        if head is None:
            continue
        indent = len(head["indent"])
        last = i  # the header ends where its brackets close
        depth = 0
        while True:
            code = _code(lines[last])
            depth += sum(code.count(c) for c in "([") - sum(code.count(c) for c in ")]")
            if depth <= 0 or last + 1 == len(lines):
                break
            last += 1
        if not _code(lines[last]).endswith(":"):
            continue
        end, in_string = last, False
        for k in range(last + 1, len(lines)):
            stripped = lines[k].strip()
            statement = bool(stripped) and not stripped.startswith("#")
            # A docstring's lines belong to the body at any indentation.
            if (
                not in_string
                and statement
                and len(lines[k]) - len(lines[k].lstrip()) <= indent
            ):
                break
            if in_string or statement:
                end = k
            if (lines[k].count('"""') + lines[k].count("'''")) % 2:
                in_string = not in_string
        kind = "class" if head["cls"] else "function"
        found.append((kind, head["cls"] or head["fn"], i + 1, end - i + 1))
    return found


def _sources(*suffixes: str) -> list[Path]:
    return sorted(p for p in (ROOT / "src").rglob("*") if p.suffix in suffixes)


def test_no_python_function_in_src_is_longer_than_a_screen() -> None:
    sources = _sources(".py")
    assert len(sources) > 20  # the scan sees the package
    long = [found for path in sources for found in _long_functions(path)]
    assert long == []


def test_no_cython_function_or_class_in_src_is_too_long() -> None:
    sources = _sources(".pyx", ".pxi")
    assert len(sources) > 15  # the scan sees the compiled units
    # (and it sees their classes and functions)
    assert (
        sum(len(_cython_blocks(p.read_text(encoding="utf-8"))) for p in sources) > 200
    )
    long = [found for path in sources for found in _long_functions(path)]
    assert long == []


def test_the_length_scan_counts_each_function_whole(tmp_path: Path) -> None:
    # From the def line to the body's last line; methods and nested
    # functions are measured too.
    def body(lines: int, indent: str) -> str:
        return "".join(f"{indent}x = {i}\n" for i in range(lines))

    source = (
        "def fits():\n"
        + body(MAX_FUNCTION_LINES - 1, "    ")
        + "class C:\n"
        + "    async def method(self):\n"
        + body(MAX_FUNCTION_LINES, "        ")
        + "def outer():\n"
        + "    def inner():\n"
        + body(MAX_FUNCTION_LINES, "        ")
    )
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    lines = MAX_FUNCTION_LINES + 1
    assert _long_functions(path, tmp_path) == [
        f"m.py:{MAX_FUNCTION_LINES + 2} method ({lines} lines)",
        f"m.py:{2 * MAX_FUNCTION_LINES + 3} outer ({lines + 1} lines)",
        f"m.py:{2 * MAX_FUNCTION_LINES + 4} inner ({lines} lines)",
    ]


def test_the_length_scan_reads_cython(tmp_path: Path) -> None:
    # cdef functions with C return types and multi-line signatures, methods
    # of a cdef class, a docstring at column 0 inside a class, trailing
    # comments; declarations (no colon) and cdef variables are not blocks.
    def body(lines: int, indent: str) -> str:
        return "".join(f"{indent}x = {i}\n" for i in range(lines))

    source = (
        "cdef int64_t _fits(TimerCore core,\n"
        "                   int64_t now) except? -1:\n"
        + body(MAX_FUNCTION_LINES - 2, "    ")
        + "cdef object _cached = f(1)\n"
        + "cdef class Big(Base):\n"
        + '    """Big()\n--\n\n    doc"""\n'
        + "    cdef inline PyObject *_method(self, x) noexcept:\n"
        + body(MAX_FUNCTION_LINES, "        ")
        + "    # a comment that ends the method, not counted\n"
        + body(MAX_CLASS_LINES - MAX_FUNCTION_LINES - 6, "    ")
        + "cdef int _declared(int x) except -1\n"
        + "cdef extern from 'x.h':\n"
        + "    int tw_call(int y) nogil\n"
    )
    path = tmp_path / "m.pxi"
    path.write_text(source, encoding="utf-8")
    blocks = _cython_blocks(source)
    assert [b[:3] for b in blocks] == [
        ("function", "_fits", 1),
        ("class", "Big", MAX_FUNCTION_LINES + 2),
        ("function", "_method", MAX_FUNCTION_LINES + 7),
    ]
    assert blocks[0][3] == MAX_FUNCTION_LINES
    assert _long_functions(path, tmp_path) == [
        f"m.pxi:{MAX_FUNCTION_LINES + 2} Big ({MAX_CLASS_LINES + 1} lines)",
        f"m.pxi:{MAX_FUNCTION_LINES + 7} _method ({MAX_FUNCTION_LINES + 1} lines)",
    ]


def test_no_file_in_src_is_longer_than_a_thousand_lines() -> None:
    # The compiled core is split in .pxi units (docs/design.md, "Source
    # layout of the compiled core"), its twin in the _wheel_py package.
    sources = _sources(".py", ".pyx", ".pxi", ".pxd", ".pyi", ".h")
    assert len(sources) > 40, sorted(p.name for p in sources)
    long = {
        str(path.relative_to(ROOT)): n
        for path in sources
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


# -- what the text cites ---------------------------------------------------------
#: The folders whose text is read, and the kinds of file that hold text a
#: maintainer reads (code, headers, stubs, docs); data files are not prose.
CITING_FOLDERS = ("src", "tests", "docs", "bench")
CITING_FILES = ("README.md", "pyproject.toml", "setup.py")
TEXT_SUFFIXES = {".py", ".pyx", ".pxd", ".pyi", ".h", ".md", ".rst", ".txt"}
#: The word issue or ticket followed by a number (with or without a space, a
#: dash or a hash), or a hash and a number alone; not an HTML entity, a URL
#: fragment, or a hash inside a quoted colour or format.
ISSUE_REFERENCE = re.compile(
    r"\b(?:issue|ticket)s?[ _-]?#?\d+|(?<![\w&#/'\"])#\d{1,5}\b", re.IGNORECASE
)
#: Paths of a developer's machine: the work area, home directories.
MACHINE_PATH = re.compile(
    r"(?<![\w.])(?:/work|/scratch|/home|/root|/Users)/|(?<![\w~])~/\w"
)
#: A project document cited by its upper-case name, like the README's.
PROJECT_DOC = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_]+\.md)\b")


def _text_files(root: Path) -> Iterator[Path]:
    yield from (root / name for name in CITING_FILES if (root / name).is_file())
    for top in CITING_FOLDERS:
        for path in sorted((root / top).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES:
                yield path


def _citations(root: Path) -> list[str]:
    """``file:line what`` for each issue number, machine path or missing
    project document in the text under ``root``."""
    found = []
    for path in _text_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{path.relative_to(root)}:{number}"
            hits = ISSUE_REFERENCE.findall(line) + MACHINE_PATH.findall(line)
            hits += [
                doc
                for doc in PROJECT_DOC.findall(line)
                if not (root / doc).is_file() and not (root / "docs" / doc).is_file()
            ]
            found += [f"{where} {hit!r}" for hit in hits]
    return found


def test_text_cites_no_issue_numbers_machine_paths_or_missing_docs() -> None:
    assert sum(1 for _ in _text_files(ROOT)) > 100  # the scan sees the checkout
    assert _citations(ROOT) == []


# Each bad line is written in two pieces, so that this file's own text
# holds none of them.
@pytest.mark.parametrize(
    "line",
    [
        "# Issue" + " 30: the node keeps its deadline",
        "order (issue" + " 16, point 8)",
        "see #" + "27 for the numbers",
        "issue" + "18_variants/",
        "log at /wo" + "rk/scratch/run.txt",
        "cached in ~" + "/notes",
        "named for what they hold (STYLE" + ".md)",
    ],
)
def test_the_citation_scan_finds(tmp_path: Path, line: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(f"intro\n{line}\n", encoding="utf-8")
    assert [c.split(" ", 1)[0] for c in _citations(tmp_path)] == ["docs/page.md:2"]


@pytest.mark.parametrize(
    "line",
    [
        "the 30 s issue timeout, 16 issues in all",
        "a colour '#1f77b4' and an entity &#27;",
        "https://example.org/page#section-2",
        "see CHANGELOG.md and [design](design.md)",
        "PYSPARK_PYTHON=/opt/venvs/replay/bin/python, TMPDIR=/tmp",
        "CPython's bpo-17435",
    ],
)
def test_the_citation_scan_passes(tmp_path: Path, line: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "CHANGELOG.md").write_text("", encoding="utf-8")
    (tmp_path / "docs" / "page.md").write_text(f"{line}\n", encoding="utf-8")
    assert _citations(tmp_path) == []
