"""compare_import.py --renumber: split-dependent id values are not differences,
other rows, or rows grouped differently under one ``log_request_id``, are."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import compare_import  # noqa: E402


def _output(path: str, events: list[dict], skipped: list[dict]) -> str:
    for name, rows in (("events", events), ("skipped", skipped)):
        os.makedirs(os.path.join(path, name))
        schema = pa.schema(
            [("log_request_id", pa.int64()), ("request_id", pa.int64())]
            + [("partition", pa.string()), ("ts_ms", pa.int64())]
            if name == "events"
            else [("reason", pa.string()), ("line", pa.string())]
        )
        table = pa.Table.from_pylist(rows, schema=schema)
        pq.write_table(table, os.path.join(path, name, "part-0.parquet"))
    with open(os.path.join(path, "summary.json"), "w") as fh:
        json.dump({"events": 1, "settings": {"logs": [path]}}, fh)
    return path


def _event(lid: int, rid: int | None, partition: str, ts: int) -> dict:
    return {
        "log_request_id": lid,
        "request_id": rid,
        "partition": partition,
        "ts_ms": ts,
    }


SKIPPED = [{"reason": "acks=1", "line": None}]


def _compare(tmp_path: Any, new: list[dict], renumber: bool = True) -> list[str]:
    """compare() of an output of OLD with one of ``new`` (same skipped rows)."""
    old = _output(str(tmp_path / "old"), OLD, SKIPPED)
    out = _output(str(tmp_path / "new"), new, SKIPPED)
    return compare_import.compare(old, out, renumber=renumber)


# Request 1 has partitions p-0 and p-1, request 2 p-2; the fetch row (3)
# has no request_id.
OLD = [
    _event(1, 10, "p-0", 5),
    _event(1, 11, "p-1", 5),
    _event(2, 12, "p-2", 6),
    _event(3, None, "p-0", 7),
]


def test_other_id_values_are_equal_with_renumber(tmp_path):
    new = [
        _event(900, 70, "p-0", 5),
        _event(900, 71, "p-1", 5),
        _event(40, 5, "p-2", 6),
        _event(41, None, "p-0", 7),
    ]
    assert _compare(tmp_path, new) == []
    assert _compare(tmp_path / "plain", new, renumber=False) != []  # values count


def test_rows_regrouped_under_other_requests_differ(tmp_path):
    # Same rows, same ids up to renaming, but p-1 now belongs to request 2.
    new = [
        _event(1, 10, "p-0", 5),
        _event(2, 11, "p-1", 5),
        _event(2, 12, "p-2", 6),
        _event(3, None, "p-0", 7),
    ]
    assert "events: column 'log_request_id' differs" in _compare(tmp_path, new)


def test_a_changed_row_differs(tmp_path):
    new = [dict(row) for row in OLD]
    new[2]["ts_ms"] = 7
    assert "events: column 'ts_ms' differs" in _compare(tmp_path, new)


def test_a_shared_request_id_is_an_error(tmp_path):
    new = [dict(row) for row in OLD]
    new[1]["request_id"] = 10
    with pytest.raises(SystemExit, match="request_id: two rows share one"):
        _compare(tmp_path, new)
