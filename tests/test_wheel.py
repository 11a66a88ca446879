"""TimingWheel: boundaries, overflow wheels, clock advance; _check() throughout."""

from __future__ import annotations

import pytest


def test_wheel_boundaries(impl):
    # Kafka's TimingWheel boundaries with tick 10, size 5, start 1000.
    wheel = impl.TimingWheel(tick_ms=10, wheel_size=5, start_ms=1000)
    assert wheel.interval_ms == 50 and wheel.current_time_ms == 1000
    assert wheel.add(impl.TimerTaskEntry(999)) is False  # already due
    assert wheel.add(impl.TimerTaskEntry(1005)) is False  # inside the current tick
    wheel._check()
    assert wheel.add(impl.TimerTaskEntry(1010)) is True
    assert wheel.add(impl.TimerTaskEntry(1049)) is True
    assert wheel.overflow_wheel is None
    wheel._check()
    assert wheel.add(impl.TimerTaskEntry(1050)) is True
    overflow = wheel.overflow_wheel
    assert overflow is not None and overflow.tick_ms == 50
    assert wheel.add(impl.TimerTaskEntry(1060)) is True
    assert wheel.overflow_wheel is overflow  # the same instance for both
    assert wheel.levels() == 2
    wheel._check()
    assert wheel.counter.value == 4
    assert wheel.bucket(1).entries()[0].expiration_ms == 1010
    assert wheel.bucket(4).entries()[0].expiration_ms == 1049


def test_wheel_advance_clock_rounds_to_tick(impl):
    wheel = impl.TimingWheel(tick_ms=10, wheel_size=5, start_ms=1000)
    wheel.advance_clock(1005)
    assert wheel.current_time_ms == 1000
    wheel.advance_clock(1010)
    assert wheel.current_time_ms == 1010
    wheel.advance_clock(1000)  # never backwards
    assert wheel.current_time_ms == 1010


def test_wheel_overflow_clock_follows(impl):
    wheel = impl.TimingWheel(tick_ms=10, wheel_size=5, start_ms=1000)
    entry = impl.TimerTaskEntry(1060)
    assert wheel.add(entry)
    wheel.advance_clock(1060)
    assert wheel.current_time_ms == 1060
    assert wheel.overflow_wheel.current_time_ms == 1050


def test_wheel_start_rounds_down(impl):
    assert impl.TimingWheel(10, 5, 1009).current_time_ms == 1000
    assert impl.TimingWheel(10, 5, -5).current_time_ms == -10  # floor, like Python


def test_wheel_cascade_via_queue(impl):
    # Drive a bare wheel the way a timer does: poll due buckets, advance,
    # re-add; entries come out exactly at their expiration.
    wheel = impl.TimingWheel(tick_ms=1, wheel_size=4, start_ms=0)
    queue = wheel.queue
    expirations = [1, 3, 4, 7, 16, 17, 63, 64, 65, 300]
    for e in expirations:
        assert wheel.add(impl.TimerTaskEntry(e))
        wheel._check()
    fired = []
    now = 0
    while len(queue):
        now = queue.next_expiration_ms
        bucket = queue.poll(now)
        wheel.advance_clock(now)

        def readd(entry, now=now):
            if not wheel.add(entry):
                assert entry.expiration_ms == now  # never early, never late
                fired.append(entry.expiration_ms)

        bucket.flush(readd)
        wheel._check()
    assert fired == expirations
    assert wheel.counter.value == 0


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"tick_ms": 0}, ValueError, "tick_ms must be >= 1, got 0"),
        ({"tick_ms": -3}, ValueError, "tick_ms must be >= 1, got -3"),
        ({"wheel_size": 1}, ValueError, "wheel_size must be >= 2, got 1"),
        ({"tick_ms": 1.5}, TypeError, "tick_ms must be an int, got 1.5"),
        ({"tick_ms": True}, TypeError, "tick_ms must be an int, got True"),
        ({"wheel_size": "20"}, TypeError, "wheel_size must be an int"),
        ({"start_ms": 2**70}, OverflowError, "start_ms="),
    ],
)
def test_wheel_bad_arguments(impl, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        impl.TimingWheel(**kwargs)


def test_wheel_add_linked_entry_refused(impl):
    wheel = impl.TimingWheel(1, 20, 0)
    entry = impl.TimerTaskEntry(5)
    assert wheel.add(entry)
    with pytest.raises(ValueError, match="already linked"):
        wheel.add(entry)
    with pytest.raises(TypeError, match="TimerTaskEntry"):
        wheel.add(5)
    wheel._check()


# -- large buckets (the compiled poll empties them in one go) ------------------------
@pytest.mark.parametrize("wheel_size", [20, 8])
def test_large_buckets_expire_in_the_same_order_on_both_cores(wheel_size):
    """Buckets of thousands of tasks, on every level, some cancelled.

    The compiled ``poll`` empties a bucket of 64 or more entries at once
    (walking the list from both ends, then handling the entries in list
    order); the pure twin unlinks them one by one.  Both must run exactly
    the same tasks at the same times in the same order, ties included.
    """
    import random

    from twins import twin_package

    from tickwheel import MockTimer

    TwinMockTimer = twin_package().MockTimer

    rnd = random.Random(wheel_size)
    delays = [rnd.choice([1, 5, 19, 20, 21, 399, 400, 7_999, 8_000, 160_001])
              + rnd.randrange(3) for _ in range(12_000)]  # fmt: skip
    cancel = set(rnd.sample(range(len(delays)), 1_500))
    runs = []
    for cls in (MockTimer, TwinMockTimer):
        timer = cls(wheel_size=wheel_size)
        fired: list[tuple[int, int]] = []
        tasks = [
            timer.schedule(d, lambda i=i: fired.append((timer.now_ms, i)))
            for i, d in enumerate(delays)
        ]
        for i in cancel:
            assert tasks[i].cancel()
        assert len(timer) == len(delays) - len(cancel)
        step = 0
        while len(timer):
            step += 1
            timer.advance_clock(97 if step % 3 else 1_003)
        timer._check()
        runs.append(fired)
    compiled, pure = runs
    assert compiled == pure
    assert sorted(i for _, i in compiled) == sorted(set(range(len(delays))) - cancel)
    assert all(t >= delays[i] for t, i in compiled)  # never early


def test_poll_merges_tasks_due_when_added_by_expiration(timers):
    # asyncio's nested timeout_at(d) (CPython's test_nested_timeouts): the
    # outer callback is on the wheel for d; the inner one is added once d has
    # passed, so it is ready at once.  The poll at d must run the outer one
    # first (added first, same expiration), and a ready task due later than
    # a polled one after it.
    core = timers.core.TimerCore(manual=True)
    outer = timers.TimerTask(10, print)
    later = timers.TimerTask(12, print)
    core.add(outer)
    core.add(later)
    core.now_ns = 11_000_000  # 10 is due, 12 not; nothing polled yet
    inner = timers.TimerTask(-1, print)  # due at 10: same expiration as outer
    core.add(inner)
    assert inner.state == "expired" and outer.state == "pending"
    core.now_ns = 13_000_000
    assert core._take_due(core.now_ms) == [outer, inner, later]
    core._check()


def test_deadline_ns_keeps_the_exact_deadline_inside_the_tick(impl):
    # The node keeps its exact deadline (clock ns) beside the
    # rounded-up expiration, so a driver can run one tick in asyncio's order.
    core = impl.TimerCore(manual=True)
    core.now_ns = 1_000_000_300
    a = impl.TimerTask(1.5, print)
    b = impl.TimerTask(1.25, print)
    core.add(a)
    core.add(b)
    assert (a.expiration_ms, a.deadline_ns) == (1002, 1_001_500_300)
    assert (b.expiration_ms, b.deadline_ns) == (1002, 1_001_250_300)
    # A caller that knows it better (asyncio's call_at(when)) may set it
    # within the tick's reach, never after the expiration.
    b.deadline_ns = 1_001_250_000
    assert b.deadline_ns == 1_001_250_000 and b.expiration_ms == 1002
    with pytest.raises(ValueError, match="deadline_ns must be in"):
        b.deadline_ns = 1_002_000_001
    with pytest.raises(TypeError, match="deadline_ns must be an int, got 1.5"):
        b.deadline_ns = 1.5
    # Re-adding computes it afresh, in the past too.
    a.postpone(-10_000)
    assert a.deadline_ns == 1_000_000_300 - 10_000 * 10**6
    core._check()
