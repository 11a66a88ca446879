"""The replay job: read events, replay on Spark, write outputs, summary and plots.

``tickwheel replay INPUT OUTPUT`` runs :func:`run_replay`; ``tickwheel replay
--demo OUTPUT`` first writes a synthetic trace to ``OUTPUT/input`` with
:func:`tickwheel.spark.trace.write_trace`.  Each stage prints one progress
line (``[replay 3/6] ...``) with its time; Spark's console progress bar shows
the tasks of long stages.

Outputs under OUTPUT/: ``outcomes/``, ``purgatory_size/`` and ``rejected/``
(Parquet datasets), ``summary.json``, ``latency_cdf.png`` and
``purgatory_size.png``.  The exit code is 0 if no row was rejected, 1 if some
were (the outputs are complete either way).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .engine import REJECT_REASONS

__all__ = ["read_events", "run_replay", "summarize"]

STAGES = 6


class _Progress:
    """One line per stage: ``[replay k/n] what ... done in 1.2 s``."""

    def __init__(self, total: int, out: TextIO) -> None:
        self.total = total
        self.index = 0
        self.out = out
        self.started = time.perf_counter()
        self.t0 = self.started

    def stage(self, text: str) -> None:
        self.index += 1
        self.t0 = time.perf_counter()
        print(
            f"[replay {self.index}/{self.total}] {text} ...", file=self.out, flush=True
        )

    def done(self, detail: str = "") -> None:
        took = time.perf_counter() - self.t0
        extra = f" ({detail})" if detail else ""
        print(
            f"[replay {self.index}/{self.total}] done in {took:.1f} s{extra}",
            file=self.out,
            flush=True,
        )


def read_events(spark: Any, path: str, fmt: str | None = None) -> Any:
    """Read the events table: Parquet by default, CSV (with header) or JSON lines.

    The format comes from ``fmt`` or, failing that, the path's suffix
    (``.csv``, ``.json``/``.jsonl``; a directory is read as Parquet unless
    its files say otherwise).  CSV and JSON columns are read as strings and
    cast by the replay, so a bad value becomes a rejected row, not a failure.

    :raises FileNotFoundError: if a local ``path`` does not exist
    :raises ValueError: for an unknown ``fmt``
    """
    if "://" not in path and not os.path.exists(path):
        raise FileNotFoundError(f"input {path!r} does not exist")
    if fmt is None:
        fmt = _guess_format(path)
    if fmt == "parquet":
        return spark.read.parquet(path)
    from pyspark.sql.types import StringType, StructField, StructType

    from .engine import INPUT_COLUMNS

    strings = StructType([StructField(c, StringType()) for c in INPUT_COLUMNS])
    if fmt == "csv":
        return spark.read.csv(path, header=True, schema=strings)
    if fmt == "json":
        return spark.read.json(path, schema=strings)
    raise ValueError(f"fmt must be 'parquet', 'csv' or 'json', got {fmt!r}")


def _guess_format(path: str) -> str:
    lower = path.lower().rstrip("/")
    if lower.endswith(".csv"):
        return "csv"
    if lower.endswith((".json", ".jsonl")):
        return "json"
    if os.path.isdir(path):
        names = [n.lower() for n in os.listdir(path) if not n.startswith((".", "_"))]
        if names and all(n.endswith(".csv") for n in names):
            return "csv"
        if names and all(n.endswith((".json", ".jsonl")) for n in names):
            return "json"
    return "parquet"


def summarize(outcomes: Any, rejected_counts: dict[str, int]) -> dict[str, Any]:
    """Counts, expiry rate and latency percentiles, per timeout and partition.

    Latency percentiles are exact, over *completed* requests (an expired
    request's latency is its timeout).
    """
    from pyspark.sql import functions as F

    def stats(group: list[str]) -> list[dict[str, Any]]:
        completed = F.col("outcome") == "completed"
        rows = (
            outcomes.groupBy(*group)
            .agg(
                F.count("*").alias("requests"),
                F.sum(completed.cast("long")).alias("completed"),
                F.sum((~completed).cast("long")).alias("expired"),
                F.percentile(
                    F.when(completed, F.col("latency_ms")),
                    F.array(*map(F.lit, (0.5, 0.95, 0.99))),
                ).alias("q"),
                F.max(F.when(completed, F.col("latency_ms"))).alias("max"),
            )
            .orderBy(*group)
            .collect()
        )
        out = []
        for row in rows:
            q = row["q"] or [None, None, None]
            d = {k: row[k] for k in group}
            d.update(
                requests=row["requests"],
                completed=row["completed"],
                expired=row["expired"],
                expiry_rate=row["expired"] / row["requests"]
                if row["requests"]
                else 0.0,
                latency_ms={
                    "p50": q[0],
                    "p95": q[1],
                    "p99": q[2],
                    "max": row["max"],
                },
            )
            out.append(d)
        return out

    return {
        "overall": stats(["timeout_ms"]),
        "per_partition": stats(["timeout_ms", "partition"]),
        "rejected": rejected_counts,
    }


def _fmt_ms(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.0f}"


def print_summary(
    summary: dict[str, Any], out: TextIO, max_partitions: int = 12
) -> None:
    """The summary as a fixed-width table (overall, then the worst partitions)."""
    head = (
        f"{'timeout_ms':>10} {'partition':<16} {'requests':>10} {'expired':>9} "
        f"{'expiry':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    )

    def line(row: dict[str, Any], partition: str) -> str:
        lat = row["latency_ms"]
        timeout = row["timeout_ms"]
        return (
            f"{'row' if timeout is None else timeout:>10} {partition:<16.16} "
            f"{row['requests']:>10,} {row['expired']:>9,} {row['expiry_rate']:>7.2%} "
            f"{_fmt_ms(lat['p50']):>8} {_fmt_ms(lat['p95']):>8} "
            f"{_fmt_ms(lat['p99']):>8} {_fmt_ms(lat['max']):>8}"
        )

    print(head, file=out)
    for row in summary["overall"]:
        print(line(row, "(all)"), file=out)
    worst = sorted(summary["per_partition"], key=lambda r: -r["expiry_rate"])
    shown = worst[:max_partitions]
    if shown:
        print(f"-- {len(shown)} partitions with the highest expiry rate:", file=out)
        for row in shown:
            print(line(row, str(row["partition"])), file=out)
    rejected = summary["rejected"]
    total = sum(rejected.values())
    print(f"rejected rows: {total:,}" + (f" {rejected}" if total else ""), file=out)


def join(base: str, name: str) -> str:
    """``base/name`` for local paths and URLs alike."""
    return base.rstrip("/") + "/" + name


def _plots(outcomes: Any, sizes: Any, output: str, sweep: bool) -> list[str]:
    """latency_cdf.png and purgatory_size.png; returns the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "matplotlib is not installed: no plots (pip install 'tickwheel[spark]')",
            file=sys.stderr,
        )
        return []
    from pyspark.sql import functions as F

    written = []
    qs = [i / 200 for i in range(201)]
    cdf = (
        outcomes.where(F.col("outcome") == "completed")
        .groupBy("timeout_ms")
        .agg(
            F.percentile_approx("latency_ms", qs, 10_000).alias("q"),
            F.count("*").alias("n"),
        )
        .orderBy("timeout_ms")
        .collect()
    )
    totals = {
        r["timeout_ms"]: r["n"]
        for r in outcomes.groupBy("timeout_ms")
        .count()
        .withColumnRenamed("count", "n")
        .collect()
    }
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in cdf:
        share = row["n"] / totals[row["timeout_ms"]]
        label = (
            f"timeout {row['timeout_ms']} ms"
            if sweep
            else f"requests with timeout_ms={row['timeout_ms']}"
        )
        ax.plot([max(v, 0.5) for v in row["q"]], [q * share for q in qs], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency of completed requests (ms, log)")
    ax.set_ylabel("share of all requests completed")
    ax.set_title("acks=all produce latency (event-time replay)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path = os.path.join(output, "latency_cdf.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    size = (
        sizes.groupBy("timeout_ms", "window_start_ms")
        .agg(F.sum("pending_end").alias("pending"), F.sum("pending_max").alias("peak"))
        .orderBy("timeout_ms", "window_start_ms")
        .collect()
    )
    fig, ax = plt.subplots(figsize=(8, 4.5))
    series: dict[Any, tuple[list[float], list[int]]] = {}
    for row in size:
        xs, ys = series.setdefault(row["timeout_ms"], ([], []))
        xs.append(row["window_start_ms"] / 1000)
        ys.append(row["pending"])
    t0 = min((xs[0] for xs, _ in series.values() if xs), default=0.0)
    for timeout, (xs, ys) in series.items():
        label = "row timeouts" if timeout is None else f"timeout {timeout} ms"
        ax.step([x - t0 for x in xs], ys, where="post", label=label)
    ax.set_xlabel("event time (s since the first event)")
    ax.set_ylabel("pending requests (all partitions)")
    ax.set_title("purgatory size at the end of each second")
    ax.grid(True, alpha=0.3)
    ax.legend()
    path = os.path.join(output, "purgatory_size.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def run_replay(
    input_path: str,
    output: str,
    *,
    master: str = "local[*]",
    timeout_ms: Sequence[int] | None = None,
    replica_lag_max_ms: int | None = None,
    fmt: str | None = None,
    ui: bool = False,
    conf: dict[str, str] | None = None,
    plots: bool = True,
    out: TextIO | None = None,
    spark: Any = None,
) -> int:
    """Run the replay job; return the exit code (0: nothing rejected, 1: some rows).

    :param input_path: events (Parquet dataset/file, CSV or JSON lines)
    :param output: output directory (created; existing outputs are replaced)
    :param master: Spark master URL
    :param timeout_ms: None (row timeouts) or timeouts to sweep in one pass
    :param replica_lag_max_ms: None (fixed ISR) or the ISR lag limit
    :param conf: further Spark settings for the session this builds
    :param out: where progress and the summary go (default: sys.stdout)
    :param spark: an existing SparkSession to use (default: build one)
    """
    if out is None:
        out = sys.stdout
    from ._glue import replay_to, spark_session
    from .engine import _check_lag, normalize_timeouts

    normalize_timeouts(list(timeout_ms) if timeout_ms else None)
    _check_lag(replica_lag_max_ms)
    progress = _Progress(STAGES, out)
    progress.stage(f"starting Spark ({master})")
    if spark is None:
        spark = spark_session(master, ui=ui, extra_conf=conf)
    progress.done(f"Spark {spark.version}")

    progress.stage(f"reading {input_path}")
    events = read_events(spark, input_path, fmt)
    progress.done(f"columns {events.columns}")

    settings = "row timeouts" if not timeout_ms else f"timeouts {list(timeout_ms)} ms"
    isr = (
        "fixed ISR"
        if replica_lag_max_ms is None
        else f"replica lag max {replica_lag_max_ms} ms"
    )
    progress.stage(f"replaying through the purgatory ({settings}, {isr}) and writing")
    if "://" not in output:
        os.makedirs(output, exist_ok=True)
    meta = replay_to(
        events, output, list(timeout_ms) if timeout_ms else None, replica_lag_max_ms
    )
    events_n = sum(r["events"] for r in meta)
    accelerated = sorted({bool(r["accelerated"]) for r in meta})
    mode = (
        "accelerated"
        if accelerated == [True]
        else "pure Python"
        if accelerated == [False]
        else "mixed (some workers pure Python)"
        if accelerated
        else "no tasks"
    )
    progress.done(
        f"{events_n:,} events, {len(meta)} engine tasks, engine {mode}; "
        f"wrote outcomes/, purgatory_size/, rejected/ to {output}"
    )

    progress.stage("counting rejected rows")
    outcomes = spark.read.parquet(join(output, "outcomes"))
    rejected = spark.read.parquet(join(output, "rejected"))
    rejected_counts = {
        r["reason"]: r["count"] for r in rejected.groupBy("reason").count().collect()
    }
    progress.done(f"{sum(rejected_counts.values()):,} rejected rows")

    progress.stage("summarizing")
    summary = summarize(outcomes, rejected_counts)
    summary["settings"] = {
        "timeout_ms": list(timeout_ms) if timeout_ms else None,
        "replica_lag_max_ms": replica_lag_max_ms,
        "input": input_path,
        "events": events_n,
        "engine": mode,
        "reject_reasons": list(REJECT_REASONS) + ["invalid <column>"],
    }
    if "://" not in output:
        with open(os.path.join(output, "summary.json"), "w") as fh:
            json.dump(summary, fh, indent=2)
    progress.done()
    print_summary(summary, out)

    progress.stage("plotting")
    sizes = spark.read.parquet(join(output, "purgatory_size"))
    sweep = bool(timeout_ms)
    written = (
        _plots(outcomes, sizes, output, sweep) if plots and "://" not in output else []
    )
    progress.done(", ".join(os.path.basename(p) for p in written) or "skipped")
    print(
        f"total {time.perf_counter() - progress.started:.1f} s; outputs in {output}",
        file=out,
    )
    return 1 if sum(rejected_counts.values()) else 0
