"""The request-log import's summary: counts of lines, rows and reasons.

Everything comes from one small aggregate of the persisted rows and one
distinct count, never from the tables just written; the summary is written
as ``summary.json`` and printed in a few lines.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from ._collect import collect
from ._log_rows import COUNTED_ROW
from ._log_schema import REQUEST_TIMED_OUT


def _line_counts(rows: list[Any]) -> dict[str, Any]:
    """Lines by kind (API, follower/consumer fetch) and the time span, from
    the groups of :func:`_count_groups` (a line's first row counts it)."""
    rows = [r for r in rows if r["first"]]
    counts: dict[str, Any] = {"lines": 0, "other_lines": 0, "unparseable": 0}
    by_api: dict[str, int] = {}
    fetch = {"follower": 0, "consumer": 0}
    first = last = None
    for row in rows:
        counts["lines"] += row["n"]
        if row["line_kind"] == "other line":
            counts["other_lines"] += row["n"]
            continue
        if row["line_kind"] == "unparseable":
            counts["unparseable"] += row["n"]
            continue
        by_api[row["line_kind"]] = by_api.get(row["line_kind"], 0) + row["n"]
        if row["source"]:
            fetch[row["source"]] += row["n"]
        first = row["first_ms"] if first is None else min(first, row["first_ms"])
        last = row["last_ms"] if last is None else max(last, row["last_ms"])
    counts["request_lines"] = sum(by_api.values())
    counts["requests_by_api"] = dict(sorted(by_api.items(), key=lambda kv: -kv[1]))
    counts["fetch_requests"] = fetch
    counts["time_span"] = _span(first, last)
    return counts


def _span(first: int | None, last: int | None) -> dict[str, Any]:
    def iso(ms: int | None) -> str | None:
        if ms is None:
            return None
        secs, rest = divmod(ms, 1000)
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rest:03d}Z"

    seconds = None if first is None or last is None else (last - first) / 1000
    return {"first": iso(first), "last": iso(last), "seconds": seconds}


def _count_groups(rows: Any) -> list[Any]:
    """One small aggregate of the import's rows, all the summary's counts
    come from: rows by what they are, line kind, source, reason, partition,
    kind and follower, with their lines' first and last timestamps."""
    from pyspark.sql import functions as F

    return collect(
        rows.groupBy(
            "row",
            "first",
            "line_kind",
            "source",
            "reason",
            "partition",
            "kind",
            "replica",
        ).agg(
            F.count("*").alias("n"),
            F.sum((F.col("broker_error_code") == REQUEST_TIMED_OUT).cast("long")).alias(
                "timed_out"
            ),
            F.min("completed_ms").alias("first_ms"),
            F.max("completed_ms").alias("last_ms"),
        )
    )


def _table_counts(groups: list[Any], events: Any) -> dict[str, Any]:
    """Partitions, followers, rows and skipped reasons, from the groups of
    :func:`_count_groups`, and the produce requests (a distinct count of
    ``events``).  Nothing is read back from the written tables.
    """
    from pyspark.sql import functions as F

    groups = [g for g in groups if g["row"] != COUNTED_ROW]
    (requests,) = collect(
        events.where(F.col("kind") == "produce").agg(
            F.countDistinct("log_request_id").alias("n")
        )
    )
    totals = {"produce_rows": 0, "fetch_rows": 0, "timed_out_rows": 0}
    partitions: dict[str, list[int]] = {}
    followers: set[int] = set()
    reasons: dict[str, int] = {}
    for g in groups:
        if g["reason"] is not None:
            reasons[g["reason"]] = reasons.get(g["reason"], 0) + g["n"]
            continue
        produce = g["kind"] == "produce"
        totals["produce_rows" if produce else "fetch_rows"] += g["n"]
        totals["timed_out_rows"] += g["timed_out"] or 0
        if g["partition"] is not None:
            partitions.setdefault(g["partition"], [0, 0])[0 if produce else 1] += g["n"]
        if g["replica"] is not None:
            followers.add(g["replica"])
    lonely = sorted(k for k, (p, f) in partitions.items() if p > 0 and f == 0)
    return {
        "events": {
            "produce_rows": totals["produce_rows"],
            "fetch_rows": totals["fetch_rows"],
            "produce_requests": requests["n"],
            "timed_out_rows": totals["timed_out_rows"],
            "partitions": len(partitions),
            "followers": len(followers),
        },
        "partitions_without_fetches": lonely[:1000],
        "skipped": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def print_import_summary(summary: dict[str, Any], out: TextIO) -> None:
    """What was found, in a few lines."""
    lines = summary["lines"]
    ev = summary["events"]
    span = lines["time_span"]
    print(
        f"lines: {lines['lines']:,} ({lines['request_lines']:,} requests, "
        f"{lines['other_lines']:,} other lines, {lines['unparseable']:,} unparseable)",
        file=out,
    )
    apis = ", ".join(f"{k} {v:,}" for k, v in lines["requests_by_api"].items())
    print(f"requests by type: {apis or 'none'}", file=out)
    fetch = lines["fetch_requests"]
    print(
        f"fetches: {fetch['follower']:,} from followers, {fetch['consumer']:,} "
        "from consumers",
        file=out,
    )
    print(
        f"events: {ev['produce_rows']:,} produce rows ({ev['produce_requests']:,} "
        f"requests, {ev['timed_out_rows']:,} timed out), {ev['fetch_rows']:,} fetch "
        f"rows; {ev['partitions']:,} partitions, {ev['followers']:,} followers",
        file=out,
    )
    print(
        f"time span: {span['first']} .. {span['last']} ({span['seconds']} s)", file=out
    )
    lonely = summary["partitions_without_fetches"]
    if lonely:
        print(
            f"warning: {len(lonely):,} partition(s) have produces but no follower "
            f"fetch (e.g. {lonely[0]}); the replay completes their requests at "
            "once. If followers name the topic by id, pass --topic-ids",
            file=out,
        )
    skipped = summary["skipped"]
    print(f"skipped rows: {sum(skipped.values()):,} (see skipped/)", file=out)
    for reason, n in list(skipped.items())[:12]:
        print(f"  {n:>10,}  {reason}", file=out)
