"""The report renders the same from a saved JSON as in the run that made it.

``python bench/run.py --render <json>`` re-renders a report (after a change
to the rendering, say) without measuring again; it must not change a number
or the order of a row.  Checked against the report bench/README.md quotes.
"""

from __future__ import annotations

import json
import os

import run

QUOTED = "x86_64-py3.11.7-2d9b2da733"


def test_render_from_saved_json_matches_the_run():
    with open(os.path.join(run.RESULTS, f"{QUOTED}.json")) as f:
        report = run._in_run_order(json.load(f))
    with open(os.path.join(run.RESULTS, f"{QUOTED}.md")) as f:
        assert run.render_markdown(report) == f.read()


def test_in_run_order_puts_rows_in_the_run_order():
    report = {
        "lateness": {"uvloop": 1, "floor-spin": 2, "zzz-new": 3, "tickwheel": 4},
        "memory": {"uvloop": 1, "heapq": 2, "tickwheel": 3},
    }
    out = run._in_run_order(report)
    assert list(out["lateness"]) == ["floor-spin", "tickwheel", "uvloop", "zzz-new"]
    assert list(out["memory"]) == ["tickwheel", "heapq", "uvloop"]
    assert out["stall"] == {} and out["gc"] == {}


def test_floor_note_with_the_handle_floor():
    # A run that measured floor-handle says where the wheel's own time is,
    # and bounds heapq's ratio by that floor rather than floor-clock's.
    def ns(v: float) -> dict:
        return {"median_ns": v}

    row = {
        "tickwheel": ns(120),
        "floor": ns(30),
        "floor-clock": ns(60),
        "floor-handle": ns(90),
        "heapq": ns(450),
    }
    note = run._floor_note({"W1-add": row})
    assert "returning a new cancellable handle 30 more (`floor-handle`)" in note
    assert "the wheel 30 (tickwheel ÷ floor-handle = 1.33×)" in note
    assert "heapq ÷ floor-handle = 5.0×" in note
