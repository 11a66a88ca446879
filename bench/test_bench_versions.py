"""bench/versions.py: one table of W1/W2 across interpreters."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
import versions


def _run(python: str, tw: float, heap: float, fh: float) -> dict:
    row = {
        "tickwheel": {"median_ns": tw, "ratio_median": 1.0},
        "heapq": {"median_ns": tw * heap, "ratio_median": heap},
        "asyncio": {"median_ns": tw * 12, "ratio_median": 12.0},
        "floor-handle": {"median_ns": tw * fh, "ratio_median": fh},
        "floor-node": {"median_ns": tw * fh * 1.2, "ratio_median": fh * 1.2},
    }
    return {"python": python, "workloads": {"W1-add": row, "W2-sliding": row}}


def test_medians_per_version_and_the_floor_ratios():
    runs = [
        _run("3.14.0", 100, 3.0, 0.5),
        _run("3.11.7", 50, 6.0, 0.8),
        _run("3.14.0", 120, 4.0, 0.7),
        _run("3.14.0", 110, 5.0, 0.6),
    ]
    rows = versions.summarize(runs)
    assert [(r["python"], r["workload"]) for r in rows] == [
        ("3.14.0", "W1-add"),
        ("3.14.0", "W2-sliding"),
        ("3.11.7", "W1-add"),
        ("3.11.7", "W2-sliding"),
    ]
    r = rows[0]
    assert r["runs"] == 3 and r["tickwheel_ns"] == 110 and r["heapq"] == 4.0
    assert r["over_floor"] == pytest.approx(1 / 0.6)
    assert r["heapq_over_floor"] == pytest.approx(4.0 / 0.6)
    assert r["over_node"] == pytest.approx(1 / 0.72)
    assert r["uvloop"] is None  # not installed there: a dash, not a zero
    table = versions.render(rows)
    assert "| 3.14.0 | W1 `schedule` | 110 ns | 4.00× | 12.00× | – |" in table
    assert "| 3.11.7 | W2 sliding window | 50 ns | 6.00× |" in table


def test_render_reads_a_saved_run(tmp_path, capsys):
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"runs": [_run("3.13.0", 80, 4.0, 0.9)]}))
    assert versions.main(["--render", str(path)]) == 0
    assert "| 3.13.0 | W1 `schedule` | 80 ns | 4.00×" in capsys.readouterr().out


def test_bad_arguments_name_the_argument(tmp_path, capsys):
    with pytest.raises(SystemExit):
        versions.main(["--repeat", "0"])
    assert "--repeat must be >= 1, got 0" in capsys.readouterr().err
    existing = tmp_path / "out.json"
    existing.write_text("{}")
    with pytest.raises(SystemExit):
        versions.main(["--json", str(existing)])
    assert "exists" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        versions.main(["--render", str(tmp_path / "missing.json")])
    assert "--render" in capsys.readouterr().err


def test_a_failing_interpreter_is_one_line():
    bad = f"{shlex.quote(sys.executable)} -c 'raise SystemExit(3)'"
    with pytest.raises(SystemExit, match="failed \\(3\\)"):
        versions.run_one(bad, 10, 1, "heapq")


def test_one_real_run_on_this_interpreter():
    result = versions.run_one(shlex.quote(sys.executable), 2_000, 1, "heapq")
    assert result["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(result["workloads"]["W1-add"]) == {"tickwheel", "heapq"}
