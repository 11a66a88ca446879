"""The partition column of the summary's tables: names whole, never cut short.

Why: the tables exist to name the partition that needs attention, and topic
names are often longer than any fixed width (``payments-topic-eu-west-1-17``);
a fixed ``{name:<16.16}`` printed ``payments-topic-e`` for every partition of
that topic.  So the column is as wide as the longest name shown (at least the
header), and only a name longer than :data:`MAX_WIDTH` is elided, in the
middle, so its end -- the partition number -- always shows:

>>> names = ["p-0", "a-rather-long-topic-name-for-payments-eu-0"]
>>> width = column_width(names, "partition")
>>> width
42
>>> fit("p-0", width) == "p-0".ljust(42)
True
>>> fit("x" * 70 + "-12", 20)
'xxxxxxxxx...xxxxx-12'
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_WIDTH", "column_width", "fit"]

#: Names longer than this are elided in the middle (the width of a wide terminal
#: minus the numeric columns would be less; a table may wrap, never mislead).
MAX_WIDTH = 64


def column_width(names: Iterable[str], header: str, cap: int = MAX_WIDTH) -> int:
    """The width of a column holding ``names`` under ``header``."""
    return min(cap, max([len(header), *(len(n) for n in names)]))


def fit(name: str, width: int) -> str:
    """``name`` padded to ``width``, or elided in the middle to fit it."""
    if len(name) <= width:
        return name.ljust(width)
    tail = (width - 3) // 2
    head = width - 3 - tail
    return f"{name[:head]}...{name[-tail:]}"
