"""The README's examples paste into a plain ``python`` prompt.

A reader copies a block's source lines (the text after ``>>> `` and
``... ``) into the interactive interpreter, which ends a compound statement
(``async def``, ``with``) only at an empty line.  Each block is pushed line
by line into :class:`code.InteractiveConsole`, as the prompt would read it,
followed by the empty line the reader types last; no line may fail to
compile or raise.  (Doctest checks the outputs; it accepts a ``>>>`` right
after an indented block, which the prompt does not.)
"""

from __future__ import annotations

import code
import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _blocks() -> list[list[str]]:
    blocks = []
    for body in BLOCK.findall(README.read_text(encoding="utf-8")):
        source = [
            line[4:] if len(line) > 3 else ""
            for line in body.splitlines()
            if line.startswith((">>>", "..."))
        ]
        if source:
            blocks.append(source)
    return blocks


BLOCKS = _blocks()


def test_readme_has_async_blocks() -> None:
    assert sum(any("async def" in line for line in b) for b in BLOCKS) >= 2


class _Console(code.InteractiveConsole):
    def __init__(self) -> None:
        super().__init__(locals={"__name__": "__console__"})
        self.errors: list[str] = []

    def write(self, data: str) -> None:  # tracebacks and SyntaxErrors
        self.errors.append(data)


def test_readme_blocks_paste_into_the_prompt() -> None:
    # One session, the blocks in the README's order (a later block may use
    # an earlier block's imports, as a reader's session would).
    console = _Console()
    for number, lines in enumerate(BLOCKS, 1):
        with contextlib.redirect_stdout(io.StringIO()):
            for line in [*lines, ""]:
                console.push(line)
        assert console.errors == [], f"block {number}: {lines[0]}"
        assert console.buffer == [], f"block {number} left half-entered"
