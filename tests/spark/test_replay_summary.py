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


# -- names whole, "... N more" everywhere, headers that fit the run -------------
LONG = "payments-topic-eu-west-1-orders-v2-compacted"  # 44 characters


def test_summary_prints_partition_names_whole_in_every_table():
    """Item 1: 40+ character names, differing only in the partition number."""
    per_partition = [row(None, f"{LONG}-{i}", 100, 10 + i, 50) for i in range(3)]
    summary = {
        "overall": [row(None, None, 300, 33, 50)],
        "per_partition": per_partition,
        "rejected": {},
    }
    out = io.StringIO()
    print_summary(summary, out)
    lines = out.getvalue().splitlines()
    for i in range(3):
        assert sum(f" {LONG}-{i} " in line for line in lines) == 1, lines
    # One column width for the whole table: the numbers stay aligned.
    header = lines[1]
    body = [line for line in lines if LONG in line or "(all)" in line]
    ends = {line.index("%") + 1 for line in body}
    assert len(ends) == 1 and header.index("expiry") + len("expiry") == ends.pop()


def test_summary_elides_very_long_names_in_the_middle_keeping_the_number():
    name = "t" * 100 + "-37"
    summary = {
        "overall": [row(None, None, 10, 1, 5)],
        "per_partition": [row(None, name, 10, 1, 5)],
        "rejected": {},
    }
    out = io.StringIO()
    print_summary(summary, out)
    (line,) = [ln for ln in out.getvalue().splitlines() if "..." in ln and "t" in ln]
    shown = line.split()[1]
    assert len(shown) == 64 and "..." in shown and shown.endswith("t-37")


def test_summary_header_names_own_timeouts_only_when_there_are_some():
    """Item 6: with --timeout-ms every row has a timeout; no 'own' legend."""
    summary = {
        "overall": [row(5000, None, 10, 1, 3), row(100, None, 10, 5, 3)],
        "per_partition": [row(5000, "p", 10, 1, 3)],
        "rejected": {},
    }
    out = io.StringIO()
    print_summary(summary, out)
    assert "own" not in out.getvalue()
    summary["overall"].append(row(None, None, 10, 0, 3))
    out = io.StringIO()
    print_summary(summary, out)
    assert "'own' = each request's own timeout_ms" in out.getvalue()


def test_summary_says_first_when_every_row_was_rejected():
    """Item 2: not 'no partition has expired requests' (reads like good news)."""
    summary = {"overall": [], "per_partition": [], "rejected": {"invalid ts_ms": 11}}
    out = io.StringIO()
    print_summary(summary, out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("every row was rejected (11;")
    assert "no partition has expired" not in out.getvalue()


def _broker_row(name: str, agreement: float, expired: int) -> dict[str, Any]:
    return {
        "partition": name,
        "requests": 10,
        "agreement": agreement,
        "expired": expired,
        "diff_ms": {"p50": 0.0, "p99": 1.0, "min": -1.0, "max": 1.0},
    }


def test_broker_table_ranks_expiries_and_says_how_many_more():
    """Item 5: 12 rows then "... N more"; a partition with expiries is not cut."""
    from tickwheel.spark.broker_compare import print_comparison, rank_partitions

    rows = [_broker_row(f"{LONG}-{i}", 1.0, 0) for i in range(20)]
    rows.append(_broker_row(f"{LONG}-99", 1.0, 4))  # agrees, but expired
    rows.append(_broker_row(f"{LONG}-50", 0.5, 0))  # disagrees: first
    ranked = rank_partitions(rows)
    assert [r["partition"][-3:] for r in ranked[:2]] == ["-50", "-99"]
    result = {
        "requests": 220,
        "agreement": 0.98,
        "incomplete_requests": 0,
        "outcomes": {
            "both_completed": 200,
            "both_expired": 4,
            "replay_only_expired": 16,
            "broker_only_expired": 0,
        },
        "diff_ms": {
            "min": -1.0,
            "p1": 0,
            "p50": 0,
            "p99": 1,
            "max": 1.0,
            "within_1ms": 1.0,
        },
        "worst_partitions": ranked,
    }
    out = io.StringIO()
    print_comparison(result, out)
    lines = out.getvalue().splitlines()
    table = [line for line in lines if LONG in line]
    assert len(table) == 12 and f" {LONG}-99 " in table[1]
    assert lines[-1] == "  ... 10 more"


def test_latency_plot_marks_a_group_with_one_value(plt):
    """Item 6: all latencies equal (here 0 ms) draw a vertical step: marked."""
    fig = latency_figure([(None, [0.0] * 201, 3, 3, 3)], False)
    (line,) = fig.axes[0].get_lines()
    assert line.get_marker() == "o" and not line.get_clip_on()
    plt.close(fig)
    fig = latency_figure([(None, [float(i) for i in range(201)], 3, 3, 0)], False)
    (line,) = fig.axes[0].get_lines()
    assert line.get_marker() in ("None", None, "")
    plt.close(fig)


def test_size_plot_names_partitions_with_identical_curves_together(plt):
    """Item 6: same curve, one line whose label names every partition."""
    parts = [(f"p-{i}", w, 1) for i in range(3) for w in (1000, 2000)]
    parts += [("q-0", 1000, 5), ("q-0", 2000, 6)]
    fig = size_figure([(None, 1000, 8), (None, 2000, 9)], parts)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == [
        "all partitions",
        "partition q-0",
        "partitions p-0, p-1, p-2 (same curve)",
    ]
    plt.close(fig)
    one = size_figure([(None, 1000, 8)], [("p", 1000, 8)])  # one window: marked
    assert all(line.get_marker() == "o" for line in one.axes[0].get_lines())
    plt.close(one)


def test_table_docstring_examples():
    import doctest

    from tickwheel.spark import _table

    result = doctest.testmod(_table)
    assert result.attempted > 0 and result.failed == 0
