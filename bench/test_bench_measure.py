"""Smoke test of measure.py (W3 lateness and stall, W4 memory, W6 GC) at a tiny size.

The real runs are ``python bench/run.py``; this keeps the code from rotting
under ``pytest bench --benchmark-disable`` and checks the invariants that
hold at any size: every timer fires once, none early, and tickwheel frees
what it held when every timer is cancelled.
"""

from __future__ import annotations

import sys

import pytest
from measure import (
    LATENESS,
    STALL_POLICIES,
    _make,
    gc_pause,
    interleaved,
    memory,
    stall,
)


@pytest.mark.parametrize("impl", sorted(LATENESS))
def test_lateness_smoke(impl):
    result = LATENESS[impl](300)
    assert result["fired"] == 300
    if impl.startswith("tickwheel") or impl == "floor-spin":
        # tickwheel's guarantee; uvloop, for one, does fire early (libuv
        # rounds its clock to the millisecond).
        assert result["early"] == 0
        assert result["lateness_ms"]["min"] >= 0


@pytest.mark.parametrize("impl", sorted(STALL_POLICIES))
def test_stall_smoke(impl):
    result = stall(impl, 5_000)
    assert result["worst_poll_ms"] >= result["p99_poll_ms"] > 0
    assert (result["precascade_ms_total"] > 0) is (impl != "tickwheel-kafka-cascade")


def test_memory_smoke_tickwheel_frees_on_cancel():
    result = memory("tickwheel", 5_000)
    assert 60 <= result["traced_bytes_per_timer"] <= 120
    # What stays is fixed (the freelist, the wheel levels), not per timer.
    assert result["held_after_cancel_bytes_per_timer"] * result["traced_n"] < 64 * 1024


def test_memory_smoke_heapq_holds_tombstones():
    result = memory("heapq", 5_000)
    assert result["held_after_cancel_bytes_per_timer"] > 50


def test_gc_smoke():
    result = gc_pause("tickwheel", 5_000)
    assert result["collect_empty_ms"] > 0 and result["ratio"] > 0


def test_interleaved_smoke():
    result = interleaved("heapq,sched", 400, rounds=3)
    add, sliding = result["workloads"]["W1-add"], result["workloads"]["W2-sliding"]
    assert sorted(add) == ["heapq", "sched", "tickwheel"]
    assert "sched" not in sliding  # its O(n) cancel is left out of W2
    for row in (add, sliding):
        ref = row["tickwheel"]
        assert ref["ratio_median"] == ref["ratio_min"] == ref["ratio_max"] == 1.0
        heap = row["heapq"]
        assert heap["median_ns"] > 0
        assert heap["ratio_min"] <= heap["ratio_median"] <= heap["ratio_max"]


def test_interleaved_runs_the_floors():
    # bench/_floor.pyx compiles (pyximport) and the floors run the loops;
    # their speed is for bench/run.py to report, not for a smoke test.
    result = interleaved("floor,floor-clock,floor-handle,floor-node", 2_000, rounds=3)
    for row in result["workloads"].values():
        assert sorted(row) == [
            "floor", "floor-clock", "floor-handle", "floor-node", "tickwheel"
        ]
        assert all(r["median_ns"] > 0 for r in row.values())


def test_floor_handle_is_a_handle():
    # The allocating floor returns a new handle per call, holding the
    # callable until its cancel drops it (once).
    floor = _make("floor-handle")
    a, b = floor.schedule(5, print), floor.schedule(5, print)
    assert a is not b and type(a).__name__ == "Handle"
    assert floor.cancel(a) is True and floor.cancel(a) is False
    assert floor.cancel(b) is True


def test_floor_node_is_a_handle_the_size_of_a_node():
    from tickwheel import _wheel

    floor = _make("floor-node")
    a = floor.schedule(5, print)
    assert type(a).__name__ == "Node"
    assert sys.getsizeof(a) == sys.getsizeof(_wheel.TimerTask(5, print))
    assert floor.cancel(a) is True and floor.cancel(a) is False


@pytest.mark.parametrize("kind", ["floor-ring", "floor-ring-clock"])
def test_floor_ring_links_and_unlinks(kind):
    # The ring floors link each node into one of 20 lists (the list holds a
    # reference) and cancel unlinks it once; close() lets go of the rest.
    floor = _make(kind)
    nodes = [floor.schedule(d, print) for d in (1, 21, 30_000)]
    assert type(nodes[0]).__name__ == "RingNode"
    assert floor.cancel(nodes[0]) is True and floor.cancel(nodes[0]) is False
    counts = [sys.getrefcount(nodes[i]) for i in range(3)]
    assert counts[1] == counts[2] == counts[0] + 1  # the list's reference
    floor.close()
    assert [sys.getrefcount(nodes[i]) for i in range(3)] == [counts[0]] * 3
    assert floor.cancel(nodes[1]) is False
