"""Replay vs broker: how well the replay agrees with the broker's own timings.

Why: an events table imported from a broker's request log
(:mod:`tickwheel.spark.request_log`) carries, for every produce row, what
the broker measured: ``remote_time_ms`` (the request's ``remoteTimeMs``, its
time in the purgatory) and ``broker_error_code`` (7, REQUEST_TIMED_OUT, if
the broker expired it on that partition).  Comparing the replay's outcomes
with them says how far the replay can be trusted for that log.

Kafka completes a produce request when every partition is acknowledged, so
the comparison is made per *request* (``log_request_id``): the replay
expired it if it expired any of its rows, and its replayed latency is the
largest of its rows'.  A request some of whose rows were not imported
(``request_partitions`` larger than its rows) is counted, not compared.

Worked example: two requests, the second expired by both.

>>> rows = [
...     dict(log_request_id=1, rows=1, request_partitions=1, replay_expired=False,
...          broker_expired=False, replay_latency_ms=4, remote_time_ms=4.0),
...     dict(log_request_id=2, rows=1, request_partitions=1, replay_expired=True,
...          broker_expired=True, replay_latency_ms=200, remote_time_ms=201.5),
... ]
>>> s = summarize_requests(rows)
>>> s["agreement"], s["diff_ms"]["min"], s["diff_ms"]["max"]
(1.0, -1.5, 0.0)
"""

from __future__ import annotations

import math
import os
from typing import Any, TextIO

from ._collect import collect
from ._table import column_width, fit

__all__ = [
    "BROKER_COLUMNS",
    "compare",
    "has_broker_columns",
    "maybe_compare",
    "print_comparison",
    "rank_partitions",
    "summarize_requests",
]

#: The optional events columns the comparison needs.
BROKER_COLUMNS = (
    "log_request_id",
    "request_partitions",
    "remote_time_ms",
    "broker_error_code",
)
REQUEST_TIMED_OUT = 7
_QUANTILES = (0.01, 0.05, 0.5, 0.95, 0.99)
PLOT = "replay_vs_broker.png"


def has_broker_columns(columns: list[str]) -> bool:
    """Whether an events table has the columns of an imported request log."""
    return all(c in columns for c in BROKER_COLUMNS)


def _quantile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _distribution(diffs: list[float]) -> dict[str, Any]:
    values = sorted(diffs)
    n = len(values)
    out: dict[str, Any] = {
        "count": n,
        "min": values[0] if n else None,
        "max": values[-1] if n else None,
        "mean": sum(values) / n if n else None,
    }
    for q in _QUANTILES:
        out[f"p{round(q * 100)}"] = _quantile(values, q)
    out["within_1ms"] = sum(1 for v in values if abs(v) <= 1) / n if n else None
    out["within_10ms"] = sum(1 for v in values if abs(v) <= 10) / n if n else None
    return out


def summarize_requests(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Agreement and latency differences over per-request rows (see the example).

    Each row: ``rows``, ``request_partitions``, ``replay_expired``,
    ``broker_expired``, ``replay_latency_ms``, ``remote_time_ms``.
    """
    complete = [r for r in rows if r["rows"] == r["request_partitions"]]
    agree = [r for r in complete if r["replay_expired"] == r["broker_expired"]]
    diffs = [
        r["replay_latency_ms"] - r["remote_time_ms"]
        for r in complete
        if r["remote_time_ms"] is not None
    ]
    confusion = {
        "both_completed": 0,
        "both_expired": 0,
        "replay_only_expired": 0,
        "broker_only_expired": 0,
    }
    for r in complete:
        if r["replay_expired"] and r["broker_expired"]:
            confusion["both_expired"] += 1
        elif r["replay_expired"]:
            confusion["replay_only_expired"] += 1
        elif r["broker_expired"]:
            confusion["broker_only_expired"] += 1
        else:
            confusion["both_completed"] += 1
    return {
        "requests": len(complete),
        "incomplete_requests": len(rows) - len(complete),
        "agreement": len(agree) / len(complete) if complete else None,
        "outcomes": confusion,
        "diff_ms": _distribution(diffs),
    }


def _request_frame(events: Any, outcomes: Any) -> Any:
    """Per request: rows, replayed outcome and latency, broker's, partitions."""
    from pyspark.sql import functions as F

    broker = events.where(F.col("kind") == "produce").select(
        "request_id", *BROKER_COLUMNS
    )
    joined = outcomes.join(broker, "request_id")
    return joined.groupBy("log_request_id").agg(
        F.count("*").alias("rows"),
        F.first("request_partitions").alias("request_partitions"),
        F.max((F.col("outcome") == "expired").cast("int")).alias("replay_expired"),
        F.max((F.col("broker_error_code") == REQUEST_TIMED_OUT).cast("int")).alias(
            "broker_expired"
        ),
        F.max("latency_ms").alias("replay_latency_ms"),
        F.first("remote_time_ms").alias("remote_time_ms"),
        F.collect_set("partition").alias("partitions"),
    )


def compare(
    spark: Any, events: Any, outcomes: Any, target: str, plots: bool = True
) -> dict[str, Any]:
    """The ``replay_vs_broker`` part of the summary (and its plot in ``target``).

    Per-request rows are collected to the driver (one small row per
    request); fine for a broker's day of produce requests, and exact.
    """
    rows = [
        {
            **r.asDict(),
            "replay_expired": bool(r["replay_expired"]),
            "broker_expired": bool(r["broker_expired"]),
        }
        for r in collect(_request_frame(events, outcomes))
    ]
    out = summarize_requests(rows)
    per_partition: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for p in r["partitions"]:
            per_partition.setdefault(p, []).append(r)
    worst = []
    for name, reqs in per_partition.items():
        s = summarize_requests(reqs)
        if not s["requests"]:
            continue
        d = s["diff_ms"]
        o = s["outcomes"]
        worst.append(
            {
                "partition": name,
                "requests": s["requests"],
                "agreement": s["agreement"],
                "expired": s["requests"] - o["both_completed"],
                "diff_ms": {k: d[k] for k in ("p50", "p99", "min", "max")},
            }
        )
    out["worst_partitions"] = rank_partitions(worst)
    if plots and "://" not in target:
        path = os.path.join(target, PLOT)
        _save(figure(rows), path)
        out["plot"] = PLOT
    return out


def rank_partitions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worst first, like the replay's own tables: disagreement, then expiries.

    Lowest agreement first; then the larger share of requests either side
    expired (the partitions the replay's tables name too); then the widest
    latency difference.  Every partition is kept (``summary.json`` lists
    them all; the printed table shows 12 and "... N more").
    """

    def badness(w: dict[str, Any]) -> tuple[float, float, float]:
        d = w["diff_ms"]
        spread = max(abs(d["min"] or 0), abs(d["max"] or 0))
        expired = w.get("expired", 0) / w["requests"] if w["requests"] else 0.0
        return (w["agreement"], -expired, -spread)

    return sorted(rows, key=badness)


def maybe_compare(
    spark: Any, summary: dict[str, Any], outcomes: Any, target: str, plots: bool
) -> None:
    """Add ``replay_vs_broker`` to the replay's summary if its input was imported.

    Only for a Parquet input with the broker columns, replayed with each
    request's own timeout (a ``--timeout-ms`` sweep asks another question).
    """
    settings = summary["settings"]
    if settings.get("timeout_ms"):
        return
    from .validate import inspect_input

    info = inspect_input(settings["input"])  # footers only; no Spark job
    if info.format == "parquet" and has_broker_columns(info.columns):
        events = spark.read.parquet(settings["input"])
        summary["replay_vs_broker"] = compare(spark, events, outcomes, target, plots)


def print_comparison(result: dict[str, Any], out: TextIO, limit: int = 12) -> None:
    """A few lines: agreement, the difference distribution, the worst partitions.

    The partitions are ranked by :func:`rank_partitions`; the table stops at
    ``limit`` rows with "... N more", like every table of the summary.
    """
    if not result.get("requests"):
        print("replay vs broker: no complete produce request to compare", file=out)
        return
    o, d = result["outcomes"], result["diff_ms"]
    print(
        f"replay vs broker: {result['requests']:,} requests, outcome agrees for "
        f"{result['agreement']:.2%} (both completed {o['both_completed']:,}, both "
        f"expired {o['both_expired']:,}, only replay expired "
        f"{o['replay_only_expired']:,}, only broker expired "
        f"{o['broker_only_expired']:,}); {result['incomplete_requests']:,} "
        "requests not compared (rows skipped at import)",
        file=out,
    )
    print(
        "  replayed latency - remoteTimeMs (ms): "
        + "  ".join(f"{k} {_ms(d[k])}" for k in ("min", "p1", "p50", "p99", "max"))
        + f"; within 1 ms {d['within_1ms']:.1%}",
        file=out,
    )
    worst = result["worst_partitions"]
    width = column_width((w["partition"] for w in worst[:limit]), "")
    for w in worst[:limit]:
        wd = w["diff_ms"]
        print(
            f"  {fit(w['partition'], width)} {w['requests']:>8,} requests, agrees "
            f"{w['agreement']:.1%}, expired {w.get('expired', 0):,}, "
            f"diff p50 {_ms(wd['p50'])} p99 {_ms(wd['p99'])}",
            file=out,
        )
    if len(worst) > limit:
        print(f"  ... {len(worst) - limit:,} more", file=out)


def _ms(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.1f}"


def figure(rows: list[dict[str, Any]], limit: int = 20_000) -> Any:
    """Replayed latency against the broker's remoteTimeMs, one dot per request."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    step = max(1, len(rows) // limit)
    sample = [r for r in rows[::step] if r["rows"] == r["request_partitions"]]
    groups = {
        "outcome agrees": [
            r for r in sample if r["replay_expired"] == r["broker_expired"]
        ],
        "outcome differs": [
            r for r in sample if r["replay_expired"] != r["broker_expired"]
        ],
    }
    top = 1.0
    for label, group in groups.items():
        if not group:
            continue
        xs = [r["remote_time_ms"] for r in group]
        ys = [r["replay_latency_ms"] for r in group]
        top = max(top, max(xs), max(ys))
        ax.scatter(xs, ys, s=6, alpha=0.5, label=f"{label} ({len(group):,})")
    ax.plot([0, top], [0, top], color="grey", linewidth=1, label="replay = broker")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("broker's remoteTimeMs (ms in the purgatory)")
    ax.set_ylabel("replayed latency (ms)")
    ax.set_title("acks=all produce requests: replay vs broker")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def _save(fig: Any, path: str) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
