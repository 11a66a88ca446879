"""The printed summary and plots of ``tickwheel replay``, from plain data (no Spark).

The summary must point at the problem: completed and expired side by side,
latency said to be of completed requests, the partitions that need
attention ranked (expiry rate, then p99) with no 0 % filler rows, and every
table capped with "... N more".  The plots must show requests completed at
once (latency 0), the total purgatory size and its top partitions, with
legends in words and no library warning.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from tickwheel.spark.job import latency_figure, print_summary, size_figure


def row(timeout: Any, partition: str | None, n: int, expired: int, p99: Any) -> dict:
    return {
        "timeout_ms": timeout,
        "partition": partition,
        "requests": n,
        "completed": n - expired,
        "expired": expired,
        "expiry_rate": expired / n,
        "latency_ms": {"p50": 1, "p95": 2, "p99": p99, "max": p99},
    }


def test_summary_ranks_partitions_that_need_attention_without_filler():
    per_partition = [row(5000, f"quiet-{i}", 100, 0, 5) for i in range(30)] + [
        row(5000, "slow-a", 100, 10, 4000),
        row(5000, "slow-b", 100, 10, 4900),  # same rate, higher p99: first
        row(5000, "worst", 100, 50, None),  # every completion... none at all
    ]
    per_partition += [row(5000, f"few-{i}", 1000, 1, 7) for i in range(15)]
    summary = {
        "overall": [row(5000, None, 6000, 85, 4900), row(None, None, 6000, 0, 9)],
        "per_partition": per_partition,
        "rejected": {"null kind": 3, "unknown kind": 1},
    }
    out = io.StringIO()
    print_summary(summary, out, limit=12)
    text = out.getvalue()
    lines = text.splitlines()
    assert "of completed requests" in lines[0]
    assert "completed" in lines[1] and "expired" in lines[1]
    assert " own " in text  # the row-timeout setting, in words
    ranked = [
        line.split()[1]
        for line in lines
        if line.split()[1:2] and line.split()[1] in ("worst", "slow-a", "slow-b")
    ]
    assert ranked == ["worst", "slow-b", "slow-a"]
    assert "quiet-" not in text  # no 0 % rows
    assert "  ... 6 more" in lines  # 18 partitions with expiries, 12 shown
    assert "rejected rows: 4 (see rejected/)" in text
    assert lines[-2].split() == ["3", "null", "kind"]


def test_summary_says_when_no_partition_expired():
    summary = {
        "overall": [row(5000, None, 10, 0, 3)],
        "per_partition": [row(5000, "p", 10, 0, 3)],
        "rejected": {},
    }
    out = io.StringIO()
    print_summary(summary, out)
    assert "-- no partition has expired requests" in out.getvalue()
    assert "\np " not in out.getvalue() and out.getvalue().count("(all)") == 1


@pytest.fixture
def plt() -> Any:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def test_latency_plot_shows_requests_completed_at_once(plt):
    qs = [0] * 80 + list(range(1, 122))  # 40 % of the completions at 0 ms
    fig = latency_figure([(30_000, qs, 200, 150, 60), (None, None, 10, 0, 0)], True)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["timeout 30,000 ms: 75% completed, 30% at once (0 ms)"]
    (line,) = ax.get_lines()
    assert line.get_xdata()[0] == 0  # not moved to 0.5 ms on a log axis
    assert ax.get_xscale() == "symlog"
    plt.close(fig)


def test_size_plot_shows_total_and_top_partitions_in_words(plt):
    totals = [(None, 1000, 5), (None, 2000, 9)]
    parts = [("orders-1", 1000, 4), ("orders-1", 2000, 6), ("orders-7", 2000, 3)]
    fig = size_figure(totals, parts)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["all partitions", "partition orders-1", "partition orders-7"]
    plt.close(fig)
    sweep = size_figure([(100, 1000, 1), (5000, 1000, 2)], parts[:1], 5000)
    labels = [t.get_text() for t in sweep.axes[0].get_legend().get_texts()]
    assert labels == [
        "all partitions, timeout 100 ms",
        "all partitions, timeout 5,000 ms",
        "partition orders-1, timeout 5,000 ms",
    ]
    plt.close(sweep)
    empty = size_figure([], [])  # no legend warning with nothing to draw
    assert empty.axes[0].get_legend() is None
    plt.close(empty)
