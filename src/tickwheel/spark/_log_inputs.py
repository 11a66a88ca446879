"""The request-log import's inputs, checked before Spark starts.

The log files under the paths given (and a check that their first lines
hold request-log lines at all), and the topic id -> name map for followers
that name topics by id.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from ._log_schema import MARKER
from .validate import ReplayUsageError


def find_logs(paths: Sequence[str]) -> list[str]:
    """The log files under ``paths`` (files, or directories walked recursively).

    Hidden files and names starting with ``_`` are left out, as Spark does.
    A gzipped file must be named ``*.gz`` (Spark decompresses by suffix).

    :raises ReplayUsageError: for a missing or unreadable path, a directory
        without files, or a gzipped file without the suffix
    """
    files: list[str] = []
    for path in paths:
        if not os.path.exists(path):
            raise ReplayUsageError(f"LOG {path!r} does not exist")
        if not os.access(path, os.R_OK):
            raise ReplayUsageError(f"LOG {path!r} is not readable")
        if os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                found += [
                    os.path.join(root, n)
                    for n in sorted(names)
                    if not n.startswith(("_", "."))
                ]
            if not found:
                raise ReplayUsageError(f"LOG {path!r} is a directory without files")
            files += found
        else:
            files.append(path)
    for path in files:
        with open(path, "rb") as fh:
            gzipped = fh.read(2) == b"\x1f\x8b"
        if gzipped and not path.endswith(".gz"):
            raise ReplayUsageError(
                f"LOG file {path!r} is gzipped but not named .gz; rename it "
                "(Spark decompresses by suffix)"
            )
    return sorted(dict.fromkeys(os.path.abspath(f) for f in files))


#: How much of each file the check before Spark reads (lines, and bytes).
HEAD_LINES = 10_000
HEAD_BYTES = 16 << 20


def check_request_lines(files: Sequence[str], logs: Sequence[str]) -> None:
    """Fail fast if no file's first lines hold a request-log line.

    Reads up to :data:`HEAD_LINES` lines (and :data:`HEAD_BYTES`) of each
    file, plain or gzipped, and stops at the first ``Completed request:``;
    a file it cannot read is left to Spark.

    :raises ReplayUsageError: naming LOG and how many lines were read
    """
    import gzip
    import zlib

    marker = MARKER.encode()
    seen, whole = 0, True
    for path in files:
        opener: Any = gzip.open if path.endswith(".gz") else open
        budget = HEAD_BYTES
        try:
            with opener(path, "rb") as fh:
                for _ in range(HEAD_LINES):
                    line = fh.readline(budget)
                    if not line:
                        break
                    if marker in line:
                        return
                    seen += 1
                    budget -= len(line)
                    if budget <= 0:
                        break
                whole = whole and not fh.read(1)
        except (OSError, EOFError, zlib.error):
            return
    where = f"{seen:,} lines" if whole else f"the first {seen:,} lines read"
    raise ReplayUsageError(
        f"LOG {', '.join(logs)}: no request-log lines ('{MARKER}...') in "
        f"{where}; is kafka.request.logger at DEBUG?"
    )


_DESCRIBE = re.compile(r"Topic:\s*(\S+)\s+TopicId:\s*(\S+)")


def parse_topic_ids(text: str) -> dict[str, str]:
    """Topic id -> name from a JSON object or ``kafka-topics.sh --describe`` output.

    >>> parse_topic_ids("Topic: orders\\tTopicId: q1w2\\tPartitionCount: 3")
    {'q1w2': 'orders'}

    :raises ValueError: if the text is neither, or maps nothing
    """
    stripped = text.strip()
    mapping: dict[str, str] = {}
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise ValueError(f"not valid JSON ({exc})") from None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise ValueError("the JSON object must map topic ids to topic names")
        mapping = dict(data)
    else:
        for name, topic_id in _DESCRIBE.findall(text):
            if mapping.get(topic_id, name) != name:
                raise ValueError(f"topic id {topic_id} has two names")
            mapping[topic_id] = name
    if not mapping:
        raise ValueError(
            'no topic ids in it: give a JSON object {"<topic id>": "<name>", ...} '
            "or the output of kafka-topics.sh --describe"
        )
    return mapping


def read_topic_ids(path: str) -> dict[str, str]:
    """:func:`parse_topic_ids` of a file; one-line errors naming ``--topic-ids``."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ReplayUsageError(f"--topic-ids {path!r}: cannot read it ({reason})")
    try:
        return parse_topic_ids(text)
    except ValueError as exc:
        raise ReplayUsageError(f"--topic-ids {path!r}: {exc}") from None
