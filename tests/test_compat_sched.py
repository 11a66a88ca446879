"""Contract tests: one body run against ``sched.scheduler`` and tickwheel's.

Every test in :class:`TestSchedulerContract` runs twice, once per
implementation (the uvloop ``tests/test_base.py`` pattern), on a fake clock,
so a behaviour difference is a failure.  Deviations are tested separately.
"""

from __future__ import annotations

import datetime
import math
import random
import sched
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel import compat_sched


class FakeClock:
    """A clock in arbitrary units; delay() advances it and records the waits."""

    def __init__(self, now: Any = 0) -> None:
        self.now = now
        self.delays: list[Any] = []

    def time(self) -> Any:
        return self.now

    def sleep(self, delay: Any) -> None:
        self.delays.append(delay)
        self.now += delay


Factory = Callable[..., Any]


@pytest.fixture(params=["stdlib", "tickwheel"])
def make(request: pytest.FixtureRequest) -> Factory:
    """A scheduler factory: sched.scheduler or tickwheel's."""
    cls = sched.scheduler if request.param == "stdlib" else compat_sched.scheduler

    def factory(clock: FakeClock) -> Any:
        s = cls(clock.time, clock.sleep)
        return s

    return factory


def check(s: Any) -> None:
    if isinstance(s, compat_sched.scheduler):
        s._check()


class TestSchedulerContract:
    def test_sched_order_is_time_then_priority_then_insertion(
        self, make: Factory
    ) -> None:
        clock = FakeClock()
        s = make(clock)
        out: list[str] = []
        s.enterabs(2, 1, out.append, ("t2 p1 first",))
        s.enterabs(1, 5, out.append, ("t1 p5",))
        s.enterabs(2, 0, out.append, ("t2 p0",))
        s.enterabs(2, 1, out.append, ("t2 p1 second",))
        s.enterabs(1.5, 9, out.append, ("t1.5",))
        check(s)
        assert s.run() is None
        expected = ["t1 p5", "t1.5", "t2 p0", "t2 p1 first", "t2 p1 second"]
        assert out == expected
        assert clock.now == 2
        check(s)

    def test_sched_times_in_one_wheel_tick_still_ordered_by_time(
        self, make: Factory
    ) -> None:
        # 1.0002 and 1.0001 s fall into the same 1 ms wheel tick.
        clock = FakeClock(Fraction(0))
        s = make(clock)
        out: list[Any] = []
        for t in (
            Fraction(10002, 10000),
            Fraction(10001, 10000),
            Fraction(10000, 10000),
        ):
            s.enterabs(t, 0, out.append, (t,))
        s.run()
        assert out == sorted(out)

    def test_sched_enter_is_relative_to_timefunc(self, make: Factory) -> None:
        clock = FakeClock(100)
        s = make(clock)
        e = s.enter(5, 0, lambda: None)
        assert e.time == 105 and e.priority == 0
        assert isinstance(e, sched.Event)

    def test_sched_kwargs_and_arguments_are_passed(self, make: Factory) -> None:
        clock = FakeClock()
        s = make(clock)
        got: list[Any] = []
        s.enter(1, 0, lambda *a, **k: got.append((a, k)), (1, 2), {"x": 3})
        s.enter(2, 0, lambda *a, **k: got.append((a, k)))
        s.run()
        assert got == [((1, 2), {"x": 3}), ((), {})]

    def test_sched_cancel_removes_event(self, make: Factory) -> None:
        clock = FakeClock()
        s = make(clock)
        out: list[int] = []
        events = [s.enter(i, 0, out.append, (i,)) for i in range(5)]
        s.cancel(events[2])
        s.cancel(events[0])
        check(s)
        assert [e.argument for e in s.queue] == [(1,), (3,), (4,)]
        s.run()
        assert out == [1, 3, 4]

    def test_sched_cancel_unknown_or_twice_raises_value_error(
        self, make: Factory
    ) -> None:
        clock = FakeClock()
        s = make(clock)
        e = s.enter(1, 0, lambda: None)
        s.cancel(e)
        with pytest.raises(ValueError):
            s.cancel(e)
        other = make(FakeClock())
        foreign = other.enter(7, 0, print)
        with pytest.raises(ValueError):
            s.cancel(foreign)

    def test_sched_cancel_after_run_raises_value_error(self, make: Factory) -> None:
        clock = FakeClock()
        s = make(clock)
        e = s.enter(0, 0, lambda: None)
        s.run()
        with pytest.raises(ValueError):
            s.cancel(e)

    def test_sched_run_nonblocking_returns_delay_to_next_event(
        self, make: Factory
    ) -> None:
        clock = FakeClock(10)
        s = make(clock)
        out: list[str] = []
        s.enterabs(10, 0, out.append, ("due",))
        s.enterabs(17, 0, out.append, ("later",))
        assert s.run(blocking=False) == 7
        assert out == ["due"]
        assert clock.delays == [0]  # delayfunc(0) after each action, as sched does
        clock.now = 17
        assert s.run(blocking=False) is None
        assert out == ["due", "later"]
        assert s.run(blocking=False) is None

    def test_sched_run_blocking_waits_with_delayfunc(self, make: Factory) -> None:
        clock = FakeClock()
        s = make(clock)
        s.enterabs(3, 0, lambda: None)
        s.enterabs(5, 0, lambda: None)
        s.run()
        assert clock.delays == [3, 0, 2, 0]

    def test_sched_exception_propagates_and_run_continues(self, make: Factory) -> None:
        clock = FakeClock()
        s = make(clock)
        out: list[int] = []

        def boom() -> None:
            raise KeyError("boom")

        s.enter(1, 0, boom)
        s.enter(2, 0, out.append, (2,))
        with pytest.raises(KeyError):
            s.run()
        assert len(s.queue) == 1
        check(s)
        s.run()
        assert out == [2] and s.empty()

    def test_sched_action_may_enter_and_cancel(self, make: Factory) -> None:
        clock = FakeClock()
        s = make(clock)
        out: list[str] = []
        victim = s.enterabs(5, 0, out.append, ("victim",))

        def first() -> None:
            out.append("first")
            s.enterabs(2, 0, out.append, ("entered at 1 for 2",))
            s.enterabs(0, 0, out.append, ("already due",))
            s.cancel(victim)

        s.enterabs(1, 0, first)
        s.enterabs(3, 0, out.append, ("three",))
        s.run()
        assert out == ["first", "already due", "entered at 1 for 2", "three"]

    def test_sched_queue_is_sorted_list_of_events(self, make: Factory) -> None:
        clock = FakeClock()
        s = make(clock)
        for t, p in [(3, 0), (1, 1), (1, 0), (2, 0)]:
            s.enterabs(t, p, print)
        q = s.queue
        assert [(e.time, e.priority) for e in q] == [(1, 0), (1, 1), (2, 0), (3, 0)]
        assert all(type(e) is sched.Event for e in q)
        assert s.queue is not q and not s.empty()

    def test_sched_empty(self, make: Factory) -> None:
        s = make(FakeClock())
        assert s.empty()
        e = s.enter(1, 0, print)
        assert not s.empty()
        s.cancel(e)
        assert s.empty()

    def test_sched_float_clock_and_past_times(self, make: Factory) -> None:
        clock = FakeClock(1000.25)
        s = make(clock)
        out: list[float] = []
        for t in (1000.75, 999.0, 1000.5, 1e9):
            s.enterabs(t, 0, out.append, (t,))
        clock.now = 1001.0
        assert s.run(blocking=False) == 1e9 - 1001.0
        assert out == [999.0, 1000.5, 1000.75]


# -- model test: random operations, both implementations side by side ----------

OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("enter"),
            st.one_of(st.integers(-5, 60), st.fractions(0, 60, max_denominator=7)),
            st.integers(0, 2),
        ),
        st.tuples(st.just("cancel"), st.integers(0, 100), st.just(0)),
        st.tuples(st.just("advance"), st.integers(0, 15), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, ticks=st.sampled_from([1, 1000, 0.01, 3]))
def test_sched_model_matches_stdlib(
    ops: list[tuple[str, Any, int]], ticks: float
) -> None:
    clock = FakeClock()
    ref = sched.scheduler(clock.time, clock.sleep)
    ours = compat_sched.scheduler(clock.time, clock.sleep, ticks_per_unit=ticks)
    log_ref: list[int] = []
    log_ours: list[int] = []
    pairs: list[tuple[Any, Any]] = []

    def queue_view(s: Any) -> list[Any]:
        return [e[:3] for e in s.queue]  # (time, priority, sequence)

    for i, (op, a, b) in enumerate(ops):
        if op == "enter":
            pairs.append(
                (
                    ref.enterabs(a, b, log_ref.append, (i,)),
                    ours.enterabs(a, b, log_ours.append, (i,)),
                )
            )
        elif op == "cancel" and pairs:
            e_ref, e_ours = pairs[a % len(pairs)]
            outcomes = []
            for s, e in ((ref, e_ref), (ours, e_ours)):
                try:
                    s.cancel(e)
                    outcomes.append("ok")
                except ValueError:
                    outcomes.append("ValueError")
            assert outcomes[0] == outcomes[1]
        elif op == "advance":
            clock.now += a
            assert ref.run(blocking=False) == ours.run(blocking=False)
        assert queue_view(ref) == queue_view(ours)
        assert log_ref == log_ours
        ours._check()
    ref.run()
    ours.run()
    assert log_ref == log_ours


# -- tickwheel only: documented deviations and bad input ------------------------


def test_sched_ties_run_in_entry_order() -> None:
    # sched's rule since 3.10, with 40 ties (the contract test has two).
    clock = FakeClock()
    s = compat_sched.scheduler(clock.time, clock.sleep)
    out: list[int] = []
    for i in range(40):
        s.enterabs(5 - i % 2, 0, out.append, (i,))
    assert [e.argument for e in s.queue] == [(i,) for i in range(1, 40, 2)] + [
        (i,) for i in range(0, 40, 2)
    ]
    s.run()
    assert out == list(range(1, 40, 2)) + list(range(0, 40, 2))
    assert all(isinstance(e, sched.Event) for e in s.queue)


def test_sched_cancel_is_constant_time_with_many_events() -> None:
    clock = FakeClock()
    s = compat_sched.scheduler(clock.time, clock.sleep)
    events = [s.enter(random.random() * 100, 0, print) for _ in range(5000)]
    for e in events[::2]:
        s.cancel(e)
    s._check()
    assert len(s.queue) == 2500
    assert len(s._core) == 2500  # cancelled events left the wheel at once


def test_sched_rejects_non_numeric_times_deviation() -> None:
    # sched accepts any comparable time (datetime); tickwheel needs numbers.
    now = datetime.datetime(2024, 1, 1)
    ref = sched.scheduler(lambda: now, lambda d: None)
    ref.enter(datetime.timedelta(seconds=1), 0, print)
    assert not ref.empty()
    with pytest.raises(TypeError, match="timefunc"):
        compat_sched.scheduler(lambda: now, lambda d: None)
    s = compat_sched.scheduler(FakeClock().time, lambda d: None)
    with pytest.raises(TypeError, match="time must be a real number"):
        s.enterabs("soon", 0, print)
    with pytest.raises(ValueError, match="NaN"):
        s.enterabs(math.nan, 0, print)
    assert s.empty()


def test_sched_bad_constructor_arguments() -> None:
    with pytest.raises(TypeError, match="timefunc"):
        compat_sched.scheduler(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delayfunc"):
        compat_sched.scheduler(FakeClock().time, None)  # type: ignore[arg-type]
    for bad in (0, -1, math.inf, math.nan, "1000"):
        with pytest.raises(ValueError, match="ticks_per_unit"):
            compat_sched.scheduler(ticks_per_unit=bad)  # type: ignore[arg-type]


def test_sched_huge_and_decimal_times_keep_order() -> None:
    from decimal import Decimal

    clock = FakeClock(Decimal(0))
    s = compat_sched.scheduler(clock.time, clock.sleep)
    out: list[Any] = []
    for t in (Decimal("1e30"), Decimal("1e29"), Decimal("0.0005"), Decimal("0.0001")):
        s.enterabs(t, 0, out.append, (t,))
    s._check()
    s.run()
    assert out == sorted(out)


def test_sched_inf_time_is_last() -> None:
    clock = FakeClock(0.0)
    s = compat_sched.scheduler(clock.time, clock.sleep)
    out: list[float] = []
    s.enterabs(math.inf, 0, out.append, (math.inf,))
    s.enterabs(1e300, 0, out.append, (1e300,))
    s.enterabs(-math.inf, 0, out.append, (-math.inf,))
    assert s.run(blocking=False) == 1e300
    assert out == [-math.inf]
