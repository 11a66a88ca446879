"""Partition, DelayedProduce and DelayedFetch on a MockTimer-driven purgatory."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel import MockTimer
from tickwheel.kafka import (
    COMPLETED,
    EXPIRED,
    REQUEST_TIMED_OUT,
    DelayedFetch,
    DelayedProduce,
    Partition,
)
from tickwheel.purgatory import DelayedOperationPurgatory


@pytest.fixture
def env():
    timer = MockTimer()
    purgatory = DelayedOperationPurgatory("Produce", timer)
    done: list[Any] = []
    yield timer, purgatory, done
    purgatory._check()
    purgatory.shutdown()


def produce(timer, partition, offset, timeout_ms, done, request_id=None):
    return DelayedProduce(
        partition,
        offset,
        timeout_ms,
        clock=lambda: timer.now_ms,
        callback=done.append,
        request_id=request_id,
    )


def test_partition_high_watermark_and_isr():
    p = Partition("t-0", followers=[1, 2, 3])
    assert (p.high_watermark, p.leader_leo) == (0, 0)
    assert p.append(records=5, nbytes=500) == 5
    p.record_fetch(1, 5)
    p.record_fetch(2, 4)
    p.record_fetch(3, 2)
    assert p.high_watermark == 2
    assert p.acked(2) and not p.acked(3)
    p.shrink_isr(3)
    assert p.high_watermark == 4 and p.acked(4) and not p.acked(5)
    assert p.caught_up(1) and not p.caught_up(3)
    p.record_fetch(3, 5)
    p.expand_isr(3)
    assert p.high_watermark == 4 and sorted(p.isr) == [1, 2, 3]


def test_partition_without_followers_has_leader_hw():
    p = Partition("solo")
    p.append(3)
    assert p.high_watermark == 3 and p.acked(3)


def test_partition_bytes_between_counts_whole_batches():
    p = Partition("t-0")
    p.append(records=2, nbytes=100)  # offsets [0, 2)
    p.append(records=3, nbytes=30)  # [2, 5)
    p.append(records=1, nbytes=7)  # [5, 6)
    assert p.bytes_between(0, 6) == 137
    assert p.bytes_between(2, 6) == 37
    assert p.bytes_between(0, 4) == 100  # the second batch is not whole below 4
    assert p.bytes_between(5, 5) == 0 and p.bytes_between(6, 6) == 0


def test_delayed_produce_completes_when_isr_catches_up(env):
    timer, purgatory, done = env
    p = Partition("t-0", followers=[1, 2])
    op = produce(timer, p, p.append(records=10), 30_000, done, request_id=7)
    assert purgatory.try_complete_else_watch(op, op.keys) is False
    timer.advance_clock(5)
    p.record_fetch(1, 10)
    assert purgatory.check_and_complete(p.name) == 0
    timer.advance_clock(3)
    p.record_fetch(2, 9)
    assert purgatory.check_and_complete(p.name) == 0
    timer.advance_clock(4)
    p.record_fetch(2, 10)
    assert purgatory.check_and_complete(p.name) == 1
    assert done == [op]
    assert (op.outcome, op.error, op.done_ms, op.latency_ms, op.request_id) == (
        COMPLETED,
        None,
        12,
        12,
        7,
    )
    assert purgatory.delayed == 0 and purgatory.watched == 0


def test_delayed_produce_expires_with_timeout_error(env):
    timer, purgatory, done = env
    p = Partition("t-0", followers=[1])
    timer.advance_clock(100)
    op = produce(timer, p, p.append(), 50, done)
    purgatory.try_complete_else_watch(op, op.keys)
    timer.advance_clock(49)
    assert op.outcome is None and op.latency_ms is None
    timer.advance_clock(10)
    assert (op.outcome, op.error, op.arrival_ms, op.deadline_ms, op.done_ms) == (
        EXPIRED,
        REQUEST_TIMED_OUT,
        100,
        150,
        150,
    )
    # A fetch after the deadline changes nothing.
    p.record_fetch(1, 1)
    assert purgatory.check_and_complete(p.name) == 0 and done == [op]


def test_delayed_produce_already_acked_completes_at_once(env):
    timer, purgatory, done = env
    p = Partition("t-0", followers=[1])
    offset = p.append()
    p.record_fetch(1, offset)
    op = produce(timer, p, offset, 100, done)
    assert purgatory.try_complete_else_watch(op, op.keys) is True
    assert (op.outcome, op.done_ms, purgatory.watched, purgatory.delayed) == (
        COMPLETED,
        0,
        0,
        0,
    )


def test_delayed_produce_isr_shrink_completes_it(env):
    timer, purgatory, done = env
    p = Partition("t-0", followers=[1, 2])
    ops = [produce(timer, p, p.append(), 1000, done, request_id=i) for i in range(3)]
    for op in ops:
        purgatory.try_complete_else_watch(op, op.keys)
    p.record_fetch(1, 3)
    assert purgatory.check_and_complete(p.name) == 0
    timer.advance_clock(20)
    p.shrink_isr(2)  # follower 2 never fetched
    assert purgatory.check_and_complete(p.name) == 3
    assert [op.request_id for op in done] == [0, 1, 2]
    assert all(op.done_ms == 20 and op.outcome == COMPLETED for op in ops)


def test_delayed_fetch_min_bytes_and_max_wait():
    timer = MockTimer()
    clock = lambda: timer.now_ms  # noqa: E731
    with DelayedOperationPurgatory("Fetch", timer) as purgatory:
        a, b = Partition("a", followers=[1]), Partition("b")
        fetch = DelayedFetch({a: 0, b: 0}, min_bytes=100, max_wait_ms=500, clock=clock)
        assert sorted(fetch.keys) == ["a", "b"]
        assert purgatory.try_complete_else_watch(fetch, fetch.keys) is False
        b.append(records=1, nbytes=60)  # no followers: HW follows the leader
        timer.advance_clock(10)
        assert purgatory.check_and_complete("b") == 0
        a.append(records=1, nbytes=60)  # below min_bytes until follower 1 has it
        assert purgatory.check_and_complete("a") == 0 and fetch.available_bytes() == 60
        timer.advance_clock(10)
        a.record_fetch(1, 1)
        assert purgatory.check_and_complete("a") == 1
        assert (fetch.outcome, fetch.bytes_returned, fetch.done_ms) == (
            COMPLETED,
            120,
            20,
        )

        slow = DelayedFetch({a: 1}, min_bytes=1, max_wait_ms=500, clock=clock)
        purgatory.try_complete_else_watch(slow, slow.keys)
        timer.advance_clock(500)
        assert (slow.outcome, slow.bytes_returned, slow.done_ms) == (EXPIRED, 0, 520)


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (
            lambda p, c: DelayedProduce("t-0", 1, 10, clock=c),
            TypeError,
            "partition must be a Partition",
        ),
        (
            lambda p, c: DelayedProduce(p, -1, 10, clock=c),
            ValueError,
            "required_offset must be >= 0, got -1",
        ),
        (
            lambda p, c: DelayedProduce(p, 1, 1.5, clock=c),
            TypeError,
            "timeout_ms must be an int, got 1.5",
        ),
        (
            lambda p, c: DelayedProduce(p, 1, 10, clock=5),
            TypeError,
            "clock must be a callable",
        ),
        (
            lambda p, c: DelayedProduce(p, 1, 10, clock=c, callback=3),
            TypeError,
            "callback must be callable",
        ),
        (
            lambda p, c: DelayedFetch({}, 1, 10, clock=c),
            TypeError,
            "fetch_offsets must be a non-empty",
        ),
        (
            lambda p, c: DelayedFetch({"a": 0}, 1, 10, clock=c),
            TypeError,
            "keys must be Partitions",
        ),
        (
            lambda p, c: DelayedFetch({p: 0}, -5, 10, clock=c),
            ValueError,
            "min_bytes must be >= 0, got -5",
        ),
        (lambda p, c: p.record_fetch(9, 1), ValueError, "replica 9 is not a follower"),
        (lambda p, c: p.record_fetch(1, -1), ValueError, "leo must be >= 0"),
        (lambda p, c: p.append(records=0), ValueError, "records must be >= 1, got 0"),
        (lambda p, c: p.add_follower(1), ValueError, "replica 1 is already a follower"),
        (lambda p, c: Partition(["x"]), TypeError, "name must be hashable"),
    ],
)
def test_kafka_ops_bad_input(make, exc, match):
    p = Partition("t-0", followers=[1])
    with pytest.raises(exc, match=match):
        make(p, lambda: 0)


# -- the partition's maintained acknowledged offset ------------------------------
def test_partition_state_is_read_only_outside_its_methods():
    # The partition keeps the smallest in-sync LEO up to date itself, so its
    # containers must not be edited behind its back.
    p = Partition("t-0", followers=[1, 2])
    with pytest.raises(TypeError):
        p.leos[1] = 5  # type: ignore[index]
    assert isinstance(p.isr, frozenset) and p.isr == {1, 2}
    with pytest.raises(AttributeError):
        p.isr.add(3)  # type: ignore[attr-defined]
    snapshot = p.isr
    p.shrink_isr(2)
    assert snapshot == {1, 2} and p.isr == {1}  # a snapshot, not a view
    p.record_fetch(1, 3)
    assert dict(p.leos) == {1: 3, 2: 0}  # the view is live


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["fetch", "shrink", "expand", "append", "add"]),
            st.integers(0, 4),
            st.integers(0, 50),
        ),
        max_size=40,
    ),
    st.booleans(),
)
def test_partition_high_watermark_matches_a_brute_force_model(steps, in_sync):
    """After any sequence of changes, HW and acked() equal their definitions."""
    p = Partition("t-0", followers=[0, 1])
    for op, replica, value in steps:
        known = replica in p.leos
        if op == "fetch" and known:
            p.record_fetch(replica, value)
        elif op == "shrink" and known:
            p.shrink_isr(replica)
        elif op == "expand" and known:
            p.expand_isr(replica)
        elif op == "append":
            p.append(records=value + 1)
        elif op == "add" and not known:
            p.add_follower(replica, value, in_sync=in_sync)
        in_isr = [p.leos[r] for r in p.isr]
        assert p.high_watermark == min([p.leader_leo, *in_isr])
        for offset in (0, value, value + 1, p.leader_leo, p.leader_leo + 1):
            assert p.acked(offset) == all(leo >= offset for leo in in_isr)


def test_delayed_produce_completes_from_the_maintained_offset(env):
    # try_complete compares the partition's maintained offset: every route
    # that changes it (fetch, shrink, add_follower) is seen by the next check.
    timer, purgatory, done = env
    p = Partition("t-0", followers=[1])
    clock = lambda: timer.now_ms  # noqa: E731
    ops = [
        DelayedProduce(p, p.append(records=1), 100, clock=clock, callback=done.append)
        for _ in range(3)
    ]
    for op in ops:
        assert purgatory.try_complete_else_watch(op, op.keys) is False
    p.record_fetch(1, 1)
    assert purgatory.check_and_complete("t-0") == 1 and done == [ops[0]]
    p.add_follower(2, leo=0)  # a new in-sync follower holds the HW back
    p.record_fetch(1, 3)
    assert purgatory.check_and_complete("t-0") == 0
    p.shrink_isr(2)
    assert purgatory.check_and_complete("t-0") == 2 and done == ops


def test_delayed_produce_subclass_hooks_are_called(env):
    # DelayedProduce's compiled try_complete/on_complete are cpdef: a
    # subclass that overrides them in Python must still be the one called.
    timer, purgatory, done = env
    p = Partition("t-0", followers=[1])
    seen: list[str] = []

    class Audited(DelayedProduce):
        __slots__ = ()

        def try_complete(self) -> bool:
            seen.append("try")
            return bool(super().try_complete())

        def on_complete(self) -> None:
            seen.append("complete")
            super().on_complete()

    op = Audited(p, p.append(), 100, clock=lambda: timer.now_ms, callback=done.append)
    assert purgatory.try_complete_else_watch(op, op.keys) is False
    p.record_fetch(1, 1)
    assert purgatory.check_and_complete("t-0") == 1
    assert seen == ["try", "try", "try", "complete"] and done == [op]
    assert op.outcome == COMPLETED
