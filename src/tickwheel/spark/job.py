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

from ._collect import collect
from ._engine_schemas import REJECT_REASONS
from ._table import column_width, fit
from .validate import InputInfo, inspect_input

__all__ = ["read_events", "run_replay", "summarize"]

STAGES = 6


class _Progress:
    """One line per stage: ``[replay k/n] what ... done in 1.2 s``."""

    def __init__(self, total: int, out: TextIO, label: str = "replay") -> None:
        self.total = total
        self.label = label
        self.index = 0
        self.out = out
        self.started = time.perf_counter()
        self.t0 = self.started

    def stage(self, text: str) -> None:
        self.index += 1
        self.t0 = time.perf_counter()
        print(
            f"[{self.label} {self.index}/{self.total}] {text} ...",
            file=self.out,
            flush=True,
        )

    def done(self, detail: str = "") -> None:
        took = time.perf_counter() - self.t0
        extra = f" ({detail})" if detail else ""
        print(
            f"[{self.label} {self.index}/{self.total}] done in {took:.1f} s{extra}",
            file=self.out,
            flush=True,
        )


def read_events(
    spark: Any, path: str, fmt: str | None = None, info: InputInfo | None = None
) -> Any:
    """Read the events table: Parquet by default, CSV (with header) or JSON lines.

    Columns are matched by *name* in every format: Parquet and JSON carry
    names, and a CSV is read with the names of its own header (checked by
    :func:`tickwheel.spark.validate.inspect_input`, which also tells the
    format from ``fmt`` or the suffix), never by position.  CSV and JSON
    columns are read as strings and cast by the replay, so a bad value
    becomes a rejected row, not a failure.

    :param info: the result of ``inspect_input(path, fmt)`` if already known
    :raises ReplayUsageError: (a ValueError) for a missing input, an unknown
        format or a missing column
    """
    if info is None:
        info = inspect_input(path, fmt)
    from pyspark.sql.types import StringType, StructField, StructType

    from .engine import INPUT_COLUMNS

    if info.format == "parquet":
        return spark.read.parquet(path)
    if info.format == "csv":
        if not info.columns:  # a URL: Spark takes the names from the header
            return spark.read.csv(path, header=True, inferSchema=False)
        header = StructType([StructField(c, StringType()) for c in info.columns])
        return spark.read.csv(path, header=True, schema=header, enforceSchema=True)
    strings = StructType([StructField(c, StringType()) for c in INPUT_COLUMNS])
    return spark.read.json(path, schema=strings)


def summarize(outcomes: Any, rejected_counts: dict[str, int]) -> dict[str, Any]:
    """Counts, expiry rate and latency percentiles, per timeout and partition.

    Latency percentiles are exact and nearest-rank, over *completed*
    requests (an expired request's latency is its timeout): p50 is a latency
    some request had (of 0 and 10 ms, 0), never one interpolated between two.
    """
    from pyspark.sql import functions as F

    def stats(group: list[str]) -> list[dict[str, Any]]:
        completed = F.col("outcome") == "completed"
        rows = collect(
            outcomes.groupBy(*group)
            .agg(
                F.count("*").alias("requests"),
                F.sum(completed.cast("long")).alias("completed"),
                F.sum((~completed).cast("long")).alias("expired"),
                F.array(*map(_nearest_rank, (0.5, 0.95, 0.99))).alias("q"),
                F.max(F.when(completed, F.col("latency_ms"))).alias("max"),
            )
            .orderBy(*group)
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


def _nearest_rank(q: float) -> Any:
    """The ``q`` percentile of completed latencies: the smallest latency ``v``
    with at least a share ``q`` of them <= ``v`` (``percentile_disc``)."""
    from pyspark.sql import functions as F

    return F.expr(
        f"percentile_disc({q}) WITHIN GROUP (ORDER BY "
        "CASE WHEN outcome = 'completed' THEN latency_ms END)"
    )


def _fmt_ms(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.0f}"


def _timeout_label(timeout: Any) -> str:
    return "own" if timeout is None else f"{timeout:,}"


def _row(row: dict[str, Any], name: str, width: int) -> str:
    lat = row["latency_ms"]
    return (
        f"{_timeout_label(row['timeout_ms']):>10} {fit(name, width)} "
        f"{row['requests']:>10,} {row['completed']:>10,} {row['expired']:>9,} "
        f"{row['expiry_rate']:>7.2%} {_fmt_ms(lat['p50']):>8} "
        f"{_fmt_ms(lat['p95']):>8} {_fmt_ms(lat['p99']):>8} {_fmt_ms(lat['max']):>8}"
    )


def _head(width: int) -> str:
    return (
        f"{'timeout ms':>10} {'partition':<{width}} {'requests':>10} "
        f"{'completed':>10} {'expired':>9} {'expiry':>7} {'p50':>8} {'p95':>8} "
        f"{'p99':>8} {'max':>8}"
    )


def _more(count: int, shown: int, out: TextIO) -> None:
    if count > shown:
        print(f"  ... {count - shown:,} more", file=out)


def _attention(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Partitions with expired requests, worst first: expiry rate, then p99."""
    expiring = [r for r in rows if r["expired"]]

    def key(row: dict[str, Any]) -> tuple[float, float]:
        p99 = row["latency_ms"]["p99"]
        return (-row["expiry_rate"], -(p99 if p99 is not None else -1.0))

    return sorted(expiring, key=key)


def print_summary(summary: dict[str, Any], out: TextIO, limit: int = 12) -> None:
    """The summary as fixed-width tables, each capped at ``limit`` rows.

    Overall per timeout setting, then the partitions that need attention
    (any expired request; by expiry rate, then p99 latency), then the
    rejected rows by reason.  Latencies are of completed requests.  The
    partition column is as wide as the names shown (see :mod:`._table`).
    If every row was rejected, that comes first: nothing below was replayed.
    """
    rejected = sorted(summary["rejected"].items(), key=lambda kv: -kv[1])
    total = sum(n for _, n in rejected)
    overall = summary["overall"]
    if total and not any(r["requests"] for r in overall):
        print(
            f"every row was rejected ({total:,}; see rejected/ and the reasons "
            "below): nothing was replayed",
            file=out,
        )
    worst = _attention(summary["per_partition"])
    width = column_width((str(r["partition"]) for r in worst[:limit]), "partition")
    own = any(r["timeout_ms"] is None for r in overall)
    print(
        "latency ms (p50 p95 p99 max) of completed requests"
        + ("; timeout 'own' = each request's own timeout_ms" if own else ""),
        file=out,
    )
    print(_head(width), file=out)
    for row in overall[:limit]:
        print(_row(row, "(all)", width), file=out)
    _more(len(overall), limit, out)
    if worst:
        print(
            f"-- partitions with expired requests, worst first ({len(worst):,}):",
            file=out,
        )
        for row in worst[:limit]:
            print(_row(row, str(row["partition"]), width), file=out)
        _more(len(worst), limit, out)
    elif any(r["requests"] for r in overall):
        print("-- no partition has expired requests", file=out)
    print(f"rejected rows: {total:,}" + (" (see rejected/)" if total else ""), file=out)
    for reason, n in rejected[:limit]:
        print(f"  {n:>10,}  {reason}", file=out)
    _more(len(rejected), limit, out)


def join(base: str, name: str) -> str:
    """``base/name`` for local paths and URLs alike."""
    return base.rstrip("/") + "/" + name


_QS = [i / 200 for i in range(201)]


def _plots(outcomes: Any, sizes: Any, output: str, sweep: bool) -> list[str]:
    """latency_cdf.png and purgatory_size.png; returns the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print(
            "matplotlib is not installed: no plots (in tickwheel's checkout: "
            "pip install '.[spark]')",
            file=sys.stderr,
        )
        return []
    from pyspark.sql import functions as F

    completed = F.col("outcome") == "completed"
    cdf = [
        (r["timeout_ms"], r["q"], r["n"], r["done"], r["at_once"])
        for r in collect(
            outcomes.groupBy("timeout_ms")
            .agg(
                F.percentile_approx(
                    F.when(completed, F.col("latency_ms")), _QS, 10_000
                ).alias("q"),
                F.count("*").alias("n"),
                F.sum(completed.cast("long")).alias("done"),
                F.sum((completed & (F.col("latency_ms") == 0)).cast("long")).alias(
                    "at_once"
                ),
            )
            .orderBy("timeout_ms")
        )
    ]
    totals, parts, worst = _size_series(sizes)
    paths = [os.path.join(output, n) for n in ("latency_cdf.png", "purgatory_size.png")]
    _save(latency_figure(cdf, sweep), paths[0])
    _save(size_figure(totals, parts, worst), paths[1])
    return paths


def _save(fig: Any, path: str) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _setting(timeout: Any, sweep: bool) -> str:
    if timeout is None:
        return "each request's own timeout"
    return (
        f"timeout {timeout:,} ms"
        if sweep
        else f"requests whose timeout is {timeout:,} ms"
    )


def latency_figure(rows: list[tuple[Any, ...]], sweep: bool) -> Any:
    """CDF of completed latency, one line per setting; latency 0 is shown, not hidden.

    ``rows``: (timeout, 201 latency quantiles of completed requests or None,
    requests, completed, completed at once).  The x axis is linear up to 1 ms
    and logarithmic above it (symlog), so requests completed at once sit at 0.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    for timeout, qs, n, done, at_once in rows:
        if not qs or not n:
            continue
        share = done / n
        label = (
            f"{_setting(timeout, sweep)}: {done / n:.0%} completed, "
            f"{at_once / n:.0%} at once (0 ms)"
        )
        # A group whose latencies are all one value is a vertical step: mark
        # it, or it is an invisible line (on the y axis when that value is 0).
        one = len(set(qs)) == 1
        style: dict[str, Any] = {"marker": "o", "clip_on": False} if one else {}
        ax.step(qs, [q * share for q in _QS], where="post", label=label, **style)
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(left=0)
    ax.set_xlabel("latency of completed requests (ms; 0 = completed at once)")
    ax.set_ylabel("share of all requests completed by then")
    ax.set_title("acks=all produce latency (event-time replay)")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax)
    return fig


def _legend(ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize="small")
    else:
        ax.text(0.5, 0.5, "nothing to show", ha="center", transform=ax.transAxes)


def _size_series(sizes: Any, top: int = 4) -> tuple[list[Any], list[Any], Any]:
    """(total pending per setting and second, the top partitions', their setting).

    The top partitions (largest peak) are those of the setting whose total
    peaks highest; only their rows are collected, not every partition's.
    """
    from pyspark.sql import functions as F

    totals = [
        (r[0], r[1], r[2])
        for r in collect(
            sizes.groupBy("timeout_ms", "window_start_ms").agg(F.sum("pending_end"))
        )
    ]
    if not totals:
        return [], [], None
    worst = max(totals, key=lambda r: r[2] or 0)[0]
    mine = sizes.where(
        F.col("timeout_ms").isNull() if worst is None else F.col("timeout_ms") == worst
    )
    ranked = [
        r[0]
        for r in collect(
            mine.groupBy("partition")
            .agg(F.max("pending_end").alias("peak"))
            .orderBy(F.desc("peak"), "partition")
            .limit(top)
        )
    ]
    parts = [
        (r[0], r[1], r[2])
        for r in collect(
            mine.where(F.col("partition").isin(ranked)).select(
                "partition", "window_start_ms", "pending_end"
            )
        )
    ]
    return totals, parts, worst


def _series(rows: list[tuple[Any, ...]]) -> dict[Any, dict[int, int]]:
    """{key: {window start ms: pending}} (key: timeout or partition)."""
    out: dict[Any, dict[int, int]] = {}
    for key, window, pending in rows:
        per = out.setdefault(key, {})
        per[window] = per.get(window, 0) + (pending or 0)
    return out


def size_figure(
    totals: list[tuple[Any, ...]],
    parts: list[tuple[Any, ...]],
    parts_timeout: Any = None,
) -> Any:
    """Pending requests over event time: the total per setting, the top partitions.

    ``totals``: (timeout, window start ms, pending at its end, summed over
    partitions); ``parts``: (partition, window start ms, pending) for the
    few partitions to draw, thin, under the totals (of the setting
    ``parts_timeout``, named in a sweep).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    t0 = min((w for _, w, _ in totals), default=0)
    series = _series(totals)
    order = sorted(series, key=lambda t: (t is None, t or 0))
    for group in _same_curves(order, series):
        label = "all partitions"
        if len(series) > 1:
            label += ", " + " = ".join(_setting(t, True) for t in group)
        _step(ax, series[group[0]], t0, label, linewidth=2)
    where = f", {_setting(parts_timeout, True)}" if len(series) > 1 else ""
    per_part = _series(parts)
    ranked = sorted(per_part, key=lambda p: (-max(per_part[p].values()), str(p)))
    for i, group in enumerate(_same_curves(ranked, per_part)):
        names = ", ".join(str(p) for p in group)
        label = f"partition {names}" if len(group) == 1 else f"partitions {names}"
        same = " (same curve)" if len(group) > 1 else ""
        dash = _DASHES[i % len(_DASHES)]
        _step(
            ax,
            per_part[group[0]],
            t0,
            label + same + where,
            linewidth=1,
            alpha=0.8,
            linestyle=dash,
        )
    ax.set_xlabel("event time (s since the first event)")
    ax.set_ylabel("requests waiting in the purgatory")
    ax.set_title("purgatory size at the end of each second")
    ax.grid(True, alpha=0.3)
    _legend(ax)
    return fig


_DASHES = ("-", "--", "-.", ":")


def _same_curves(keys: list[Any], series: dict[Any, dict[int, int]]) -> list[list[Any]]:
    """``keys`` grouped by identical curves, in order: one line (and one
    label naming them all) per group, so no curve hides another."""
    groups: dict[tuple[tuple[int, int], ...], list[Any]] = {}
    for key in keys:
        groups.setdefault(tuple(sorted(series[key].items())), []).append(key)
    return list(groups.values())


def _step(ax: Any, per: dict[int, int], t0: int, label: str, **style: Any) -> None:
    xs = sorted(per)
    if len(xs) == 1:  # one window: a step of one point draws nothing
        style = {**style, "marker": "o", "clip_on": False}
    ax.step(
        [(x - t0) / 1000 for x in xs],
        [per[x] for x in xs],
        where="post",
        label=label,
        **style,
    )


def preflight(
    input_path: str,
    output: str,
    *,
    fmt: str | None = None,
    overwrite: bool = False,
    keep: tuple[str, ...] = (),
    master: str | None = None,
) -> tuple[InputInfo, list[str]]:
    """Every check that needs no Spark, in the order a user would fix them.

    Also finishes or removes what killed runs left beside OUTPUT (see
    :func:`tickwheel.spark.commit.recover`).  ``master=None`` skips the
    Java and master checks (a session is given).

    :return: (what the input holds, lines about recovered staging dirs)
    :raises ReplayUsageError: with one line saying what is wrong
    """
    from .commit import recover
    from .validate import check_apart, check_java, check_master, check_output, is_url

    recovered = [] if is_url(output) else recover(output)
    info = inspect_input(input_path, fmt)
    check_apart(input_path, output)
    check_output(output, overwrite, keep)
    if master is not None:
        check_master(master)
        check_java()
    return info, recovered


def _check_remote_output(spark: Any, output: str, overwrite: bool) -> None:
    """A remote OUTPUT must not hold anything unless ``overwrite`` (Hadoop FS)."""
    from .validate import ReplayUsageError

    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(output)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return
    if not fs.getFileStatus(path).isDirectory():
        raise ReplayUsageError(f"OUTPUT {output!r} is an existing file")
    if len(fs.listStatus(path)) and not overwrite:
        raise ReplayUsageError(
            f"OUTPUT {output!r} is not empty; give a new directory, or "
            "--overwrite to replace the outputs this tool writes there"
        )


def _engine_mode(meta: list[dict[str, Any]]) -> str:
    accelerated = sorted({bool(r["accelerated"]) for r in meta})
    if accelerated == [True]:
        return "accelerated"
    if accelerated == [False]:
        return "pure Python"
    return "mixed (some workers pure Python)" if accelerated else "no tasks"


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
    overwrite: bool = False,
    keep: tuple[str, ...] = (),
    console: Any = None,
) -> int:
    """Run the replay job; return the exit code (0: nothing rejected, 1: some rows).

    Checks everything it can before Spark starts (:func:`preflight`), writes
    the results to a staging directory beside a local OUTPUT and moves them
    into place at the end with a ``_SUCCESS`` manifest
    (:mod:`tickwheel.spark.commit`).

    :param input_path: events (Parquet dataset/file, CSV or JSON lines)
    :param output: output directory: new or empty, unless ``overwrite``
    :param master: Spark master URL
    :param timeout_ms: None (row timeouts) or timeouts to sweep in one pass
    :param replica_lag_max_ms: None (fixed ISR) or the ISR lag limit
    :param conf: further Spark settings for the session this builds
    :param out: where progress and the summary go (default: sys.stdout)
    :param spark: an existing SparkSession to use (default: build one)
    :param overwrite: replace the files an earlier run listed in its manifest
    :param keep: entries of OUTPUT that may be there (``input`` for --demo)
    :param console: a :class:`~tickwheel.spark._console.SparkConsole` (the
        CLI's: Spark's log to a file); default: Spark's own console output
    :raises ReplayUsageError: (a ValueError) for bad arguments or input
    """
    from ._engine_checks import _check_lag, normalize_timeouts
    from .validate import is_url, local_path

    out = sys.stdout if out is None else out
    output = local_path(output)
    timeouts = list(timeout_ms) if timeout_ms else None
    normalize_timeouts(timeouts)
    _check_lag(replica_lag_max_ms)
    info, recovered = preflight(
        input_path,
        output,
        fmt=fmt,
        overwrite=overwrite,
        keep=keep,
        master=master if spark is None else None,
    )
    for line in recovered:
        print(line, file=out)
    progress = _Progress(STAGES if plots else STAGES - 1, out)
    progress.stage(f"starting Spark ({master})")
    if spark is None:
        spark = _start_spark(master, ui, conf or {}, console)
    progress.done(f"Spark {spark.version}")
    remote = is_url(output)
    if remote:
        _check_remote_output(spark, output, overwrite)
    code = _run_staged(
        spark, progress, info, output, remote, timeouts, replica_lag_max_ms, plots
    )
    print(
        f"total {time.perf_counter() - progress.started:.1f} s; outputs in {output}",
        file=out,
    )
    return code


def _run_staged(
    spark: Any,
    progress: _Progress,
    info: InputInfo,
    output: str,
    remote: bool,
    timeouts: list[int] | None,
    lag_ms: int | None,
    plots: bool,
) -> int:
    """Stages 2-6 into a staging directory (local OUTPUT), then the commit.

    A failure before the commit removes the staging directory; one during
    the commit leaves it with its journal, for :func:`commit.recover`.
    """
    import shutil

    from .commit import commit, stage

    target = output if remote else stage(output)
    try:
        read = _read_and_replay(spark, progress, info, target, timeouts, lag_ms)
        code = _summarize_and_plot(spark, progress, read, target, plots)
    except BaseException:
        if not remote:
            shutil.rmtree(target, ignore_errors=True)
        raise
    if not remote:
        commit(
            target,
            output,
            {"input": info.path, "timeout_ms": timeouts, "replica_lag_max_ms": lag_ms},
        )
    return code


def _start_spark(master: str, ui: bool, conf: dict[str, str], console: Any) -> Any:
    from ._console import jvm_stderr
    from ._glue import spark_session

    if console is None:  # called from Python: Spark's own console behaviour
        return spark_session(master, ui=ui, extra_conf=conf)
    with jvm_stderr(console):
        return spark_session(
            master,
            ui=ui,
            progress=console.progress,
            extra_conf={**conf, **console.conf},
        )


def _read_and_replay(
    spark: Any,
    progress: _Progress,
    info: InputInfo,
    target: str,
    timeouts: list[int] | None,
    lag_ms: int | None,
) -> dict[str, Any]:
    """Stages 2-3: read the events, replay them and write the datasets to ``target``.

    :return: the settings part of the summary (input, events, engine mode)
    """
    from ._glue import replay_to

    progress.stage(f"reading {info.path}")
    events = read_events(spark, info.path, info=info)
    extra = f"; ignoring extra column(s) {', '.join(info.extra)}" if info.extra else ""
    progress.done(f"{info.format}{extra}")

    settings = "row timeouts" if not timeouts else f"timeouts {timeouts} ms"
    isr = "fixed ISR" if lag_ms is None else f"replica lag max {lag_ms} ms"
    progress.stage(f"replaying through the purgatory ({settings}, {isr}) and writing")
    meta = replay_to(events, target, timeouts, lag_ms)
    events_n = sum(r["events"] for r in meta)
    mode = _engine_mode(meta)
    progress.done(f"{events_n:,} events, {len(meta)} engine tasks, engine {mode}")
    return {
        "timeout_ms": timeouts,
        "replica_lag_max_ms": lag_ms,
        "input": info.path,
        "events": events_n,
        "engine": mode,
        "reject_reasons": list(REJECT_REASONS) + ["invalid <column>"],
    }


def _summarize_and_plot(
    spark: Any, progress: _Progress, settings: dict[str, Any], target: str, plots: bool
) -> int:
    """Stages 4-6: count rejected rows, summarize, plot; return the exit code."""
    out = progress.out
    progress.stage("counting rejected rows")
    outcomes = spark.read.parquet(join(target, "outcomes"))
    rejected = spark.read.parquet(join(target, "rejected"))
    rejected_counts = {
        r["reason"]: r["count"] for r in collect(rejected.groupBy("reason").count())
    }
    progress.done(f"{sum(rejected_counts.values()):,} rejected rows")

    progress.stage("summarizing")
    summary = summarize(outcomes, rejected_counts)
    summary["settings"] = settings
    from .broker_compare import maybe_compare, print_comparison

    maybe_compare(spark, summary, outcomes, target, plots)
    if "://" not in target:
        with open(os.path.join(target, "summary.json"), "w") as fh:
            json.dump(summary, fh, indent=2)
    progress.done()
    print_summary(summary, out)
    if "replay_vs_broker" in summary:
        print_comparison(summary["replay_vs_broker"], out)

    if not plots:  # --no-plots: no plotting stage at all
        return 1 if sum(rejected_counts.values()) else 0
    progress.stage("plotting")
    sizes = spark.read.parquet(join(target, "purgatory_size"))
    if "://" in target:
        progress.done("skipped: plots are drawn only for a local OUTPUT")
        return 1 if sum(rejected_counts.values()) else 0
    sweep = bool(settings["timeout_ms"])
    written = [os.path.basename(p) for p in _plots(outcomes, sizes, target, sweep)]
    broker_plot = summary.get("replay_vs_broker", {}).get("plot")
    if broker_plot:  # drawn by maybe_compare above
        written.append(broker_plot)
    progress.done(", ".join(written) or "matplotlib is not installed")
    return 1 if sum(rejected_counts.values()) else 0
