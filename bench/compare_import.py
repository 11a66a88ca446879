"""Compare two ``import-request-log`` outputs row for row (pyarrow, no Spark).

Used to check that a faster import writes what the old one wrote: the same
``events/`` and ``skipped/`` rows (as multisets: file layout and row order
are Spark's business), the same schemas, and the same ``summary.json``
apart from its ``settings``.

Run: ``python bench/compare_import.py OLD_OUTPUT NEW_OUTPUT``; exit 0 if
equal, 1 with the first differences otherwise.

The ids (``log_request_id``, ``request_id``) are Spark's
``monotonically_increasing_id``, which depend on how the input was split
into tasks; ``--renumber`` compares what they say instead of their values,
for outputs of differently split inputs: each ``request_id`` is unique, and
the same rows share a ``log_request_id``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

IDS = ("log_request_id", "request_id")


def read_table(path: str, renumber: bool = False) -> Any:
    """The Parquet dataset at ``path``, its rows sorted by every column."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    if renumber:
        table = _canonical_ids(table)
    keys = [(name, "ascending") for name in table.column_names]
    return table.sort_by(keys).combine_chunks()


def _canonical_ids(table: Any) -> Any:
    """``table`` with its ids replaced by values that do not depend on the split.

    ``request_id``: 0 on every row that has one, after checking that no two
    rows share one.  ``log_request_id``: the rank of its group, the sorted
    rows (without ids) that carry it, so two outputs agree exactly when the
    same rows are grouped together.
    """
    import pyarrow as pa

    if "request_id" in table.column_names:
        ids = [i for i in table["request_id"].to_pylist() if i is not None]
        if len(set(ids)) != len(ids):
            raise SystemExit("request_id: two rows share one")
        zeros = [None if i is None else 0 for i in table["request_id"].to_pylist()]
        index = table.column_names.index("request_id")
        table = table.set_column(index, "request_id", pa.array(zeros, pa.int64()))
    if "log_request_id" in table.column_names:
        names = [n for n in table.column_names if n not in IDS]
        rows = list(zip(*(table[n].to_pylist() for n in names)))
        lids = table["log_request_id"].to_pylist()
        groups: dict[int, list[Any]] = {}
        for lid, row in zip(lids, rows):
            if lid is not None:
                groups.setdefault(lid, []).append(row)
        sig = {lid: tuple(sorted(g, key=repr)) for lid, g in groups.items()}
        rank = {s: i for i, s in enumerate(sorted(set(sig.values()), key=repr))}
        new = [None if lid is None else rank[sig[lid]] for lid in lids]
        index = table.column_names.index("log_request_id")
        table = table.set_column(index, "log_request_id", pa.array(new, pa.int64()))
    return table


def summary(path: str) -> dict[str, Any]:
    with open(os.path.join(path, "summary.json")) as fh:
        data: dict[str, Any] = json.load(fh)
    data.pop("settings", None)
    return data


def compare(old: str, new: str, renumber: bool = False) -> list[str]:
    """The differences between two import outputs (empty if none)."""
    problems = []
    for name in ("events", "skipped"):
        a = read_table(os.path.join(old, name), renumber)
        b = read_table(os.path.join(new, name), renumber)
        if a.schema != b.schema:
            problems.append(f"{name}: schemas differ:\n{a.schema}\n---\n{b.schema}")
            continue
        if a.num_rows != b.num_rows:
            problems.append(f"{name}: {a.num_rows} rows != {b.num_rows}")
        elif not a.equals(b):
            for col in a.column_names:
                if not a[col].equals(b[col]):
                    problems.append(f"{name}: column {col!r} differs")
    if summary(old) != summary(new):
        problems.append(f"summary.json differs:\n{summary(old)}\n---\n{summary(new)}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--renumber", action="store_true")
    args = parser.parse_args()
    problems = compare(args.old, args.new, args.renumber)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"identical: {args.old} and {args.new} (events, skipped, summary)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
