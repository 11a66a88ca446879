"""Hypothesis state machine: the threading drop-in against a heapq/dict model.

:class:`tickwheel.compat_threading.Timer` objects are started on their own
``SystemTimer(reaper=False, executor="inline", clock=...)``: the clock is an
integer number of nanoseconds that only the test moves, and the test drives
the timer with ``advance_clock(0)``, so callbacks run on the test's thread
and nothing sleeps or starts a thread.  This is the manual-clock hook that
``Timer(..., timer=...)`` offers (``tests/test_compat_threading.py`` uses it
too); the shared timer behind plain ``Timer.start()`` is the same class on
the real clock with a reaper thread.

Each rule applies the same operation to the timers and to a plain reference
(a heap of ``(due_ns, id)`` plus a dict of pending ids):

* ``Timer(interval, ...).start()`` with intervals from negative through
  sub-millisecond to days, and infinite/enormous ones (clamped);
* ``cancel()`` or ``finished.set()`` on pending, finished and cancelled
  Timers, and ``cancel()`` before ``start()``;
* advancing the clock by 0, a few nanoseconds, milliseconds or years, in one
  jump (the reaper wakes late) or stepping through every due bucket (it wakes
  on time);
* callbacks that, while running, cancel another Timer or start new ones.

The reference is the documented contract: the interval is rounded up to the
millisecond and then to the tick, never early; a Timer already due when
started runs at the next expiry pass; due Timers run in deadline order
(those due in the same tick in any order: the wheel does not keep start
order across levels, see ``tests/test_compat_asyncio_model.py``).  It is
checked online, in every callback (nothing pending due earlier, never early,
and exactly on time when the reaper wakes on time), and after every rule:
``len()`` of the timer, ``is_alive()`` and ``finished`` of every Timer,
``_check()``.  Runs on both cores (the ``timers`` fixture).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest
from dropin_reference import (
    ADVANCES_NS,
    CHILD_ACTIONS,
    NS_PER_MS,
    SECONDS,
    START_NS,
    Reference,
)
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from tickwheel import compat_threading
from tickwheel.compat_threading import Timer

# The model tier (docs/development.md, "Test tiers"): minutes of Hypothesis.
pytestmark = pytest.mark.model

INTERVALS = SECONDS
ACTIONS = st.one_of(
    st.none(),
    st.tuples(st.just("cancel"), st.integers(0, 999)),
    st.tuples(st.just("start"), INTERVALS, CHILD_ACTIONS),
)
# A separate rule, so that most runs reach the deadlines of what they scheduled.
FAR_ADVANCES_NS = st.sampled_from([3_600 * 10**9, 86_400 * 10**9, 10**17])


class FakeNs:
    """A nanosecond clock that only moves when told to."""

    def __init__(self) -> None:
        self.ns = START_NS

    def __call__(self) -> int:
        return self.ns


class Rec:
    """What the test knows about one Timer."""

    def __init__(self, tid: int, interval: float, added_ns: int, action: Any) -> None:
        self.tid = tid
        self.interval = interval
        self.added_ns = added_ns
        self.action = action
        self.timer: Any = None
        self.runs = 0
        self.cancelled = False


def make_machine(timers: Any, tick_ms: int, wheel_size: int) -> type[Any]:
    class ThreadingTimerModel(RuleBasedStateMachine):
        started = Bundle("started")

        def __init__(self) -> None:
            super().__init__()
            self.clock = FakeNs()
            self.timer: Any = timers.SystemTimer(
                "model",
                tick_ms,
                wheel_size,
                reaper=False,
                executor="inline",
                clock=self.clock,
            )
            self.ref = Reference(tick_ms)
            self.recs: list[Rec] = []
            self.errors: list[str] = []
            # True while the clock stops at every due bucket (stepped advance),
            # so each Timer must run exactly at its due time.
            self.on_time = True

        # -- operations on timers and reference alike ----------------------------
        def start(self, interval: float, action: Any) -> Rec:
            now = self.clock.ns
            rec = Rec(len(self.recs), interval, now, action)
            self.recs.append(rec)
            self.ref.add(rec.tid, interval, now)
            rec.timer = Timer(interval, self.on_run, [rec], timer=self.timer)
            rec.timer.start()
            return rec

        def cancel(self, rec: Rec, how: str) -> None:
            if rec.tid in self.ref.pending:
                del self.ref.pending[rec.tid]
                rec.cancelled = True
            if how == "cancel":
                rec.timer.cancel()
            else:
                rec.timer.finished.set()  # threading: setting it cancels

        def on_run(self, rec: Rec) -> None:
            now = self.clock.ns
            rec.runs += 1
            first_ns = self.ref.first_due_ns()
            if self.ref.pending.get(rec.tid) != first_ns:
                self.errors.append(
                    f"Timer {rec.tid} (due {self.ref.pending.get(rec.tid)}) ran "
                    f"at {now} ns before one due at {first_ns} ns"
                )
            due_ns = self.ref.pending.pop(rec.tid, None)
            if due_ns is None:
                self.errors.append(f"Timer {rec.tid} ran but was not pending")
            elif now < due_ns or (self.on_time and now != due_ns):
                self.errors.append(
                    f"Timer {rec.tid} ran at {now} ns, due at {due_ns} ns "
                    f"(clock stepped: {self.on_time})"
                )
            if (
                math.isfinite(rec.interval)
                and now < rec.added_ns + Fraction(rec.interval) * 10**9
            ):
                self.errors.append(f"Timer {rec.tid} ran early at {now} ns")
            if not rec.timer.is_alive():
                self.errors.append(f"Timer {rec.tid} not alive in its callback")
            action = rec.action
            if action is None:
                return
            if action[0] == "cancel":
                self.cancel(self.recs[action[1] % len(self.recs)], "cancel")
            else:
                self.start(action[1], action[2])

        def run_due(self) -> None:
            """Expire until nothing is due at this time (what the reaper does)."""
            for _ in range(1_000):
                self.timer.advance_clock(0)
                nxt = self.timer.next_expiration_ms
                if nxt is None or nxt * NS_PER_MS > self.clock.ns:
                    return
            self.errors.append(
                f"timer stuck at {self.clock.ns} ns: bucket {nxt} ms never expired"
            )

        # -- rules ----------------------------------------------------------------
        @rule(target=started, interval=INTERVALS, action=ACTIONS)
        def start_timer(self, interval: float, action: Any) -> Rec:
            return self.start(interval, action)

        @rule(rec=started, how=st.sampled_from(["cancel", "finished.set"]))
        def cancel_timer(self, rec: Rec, how: str) -> None:
            self.cancel(rec, how)

        @rule(interval=INTERVALS)
        def cancel_before_start(self, interval: float) -> None:
            rec = Rec(len(self.recs), interval, self.clock.ns, None)
            self.recs.append(rec)
            rec.cancelled = True
            rec.timer = Timer(interval, self.on_run, [rec], timer=self.timer)
            rec.timer.cancel()
            rec.timer.start()

        @rule(step_ns=ADVANCES_NS, on_time=st.booleans())
        def advance(self, step_ns: int, on_time: bool) -> None:
            self.advance_by(step_ns, on_time)

        @rule(step_ns=FAR_ADVANCES_NS, on_time=st.booleans())
        def advance_far(self, step_ns: int, on_time: bool) -> None:
            self.advance_by(step_ns, on_time)

        def advance_by(self, step_ns: int, on_time: bool) -> None:
            target = self.clock.ns + step_ns
            self.on_time = on_time
            if on_time:
                # Stop at each due bucket, as the reaper would.
                while True:
                    self.run_due()
                    nxt = self.timer.next_expiration_ms
                    if nxt is None or nxt * NS_PER_MS > target or self.errors:
                        break
                    self.clock.ns = nxt * NS_PER_MS
            # Otherwise the reaper wakes late, once, at the target.
            self.clock.ns = target
            self.run_due()
            assert not self.errors, self.errors
            late = self.ref.due(target)
            assert not late, f"due by {target} ns but not run: {late}"

        @invariant()
        def agrees_with_reference(self) -> None:
            assert not self.errors, self.errors
            assert len(self.timer) == len(self.ref.pending)
            for rec in self.recs:
                pending = rec.tid in self.ref.pending
                assert rec.runs <= 1, rec.tid
                assert rec.runs + rec.cancelled + pending == 1, rec.tid
                assert rec.timer.is_alive() is pending, rec.tid
                assert rec.timer.finished.is_set() is not pending, rec.tid
                # Finished Timers are forgotten (nothing to wait for at exit).
                assert (rec.timer in compat_threading._started) is pending, rec.tid
            self.timer._check()

        def teardown(self) -> None:
            self.timer.close()
            assert len(self.timer) == 0
            assert not any(rec.timer.is_alive() for rec in self.recs)
            for rec in self.recs:
                rec.timer.cancel()  # leaves compat_threading's started set
            assert not any(rec.timer in compat_threading._started for rec in self.recs)

    return ThreadingTimerModel


@pytest.fixture
def timers_accepted(timers: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``timers``, with Timer(timer=...) accepting that core's SystemTimer.

    ``Timer`` checks ``isinstance(timer, compat_threading.SystemTimer)``, the
    class on the imported core; the other core's SystemTimer (``twin_package()``'s)
    has the same API but another base, so the check is pointed at it.
    """
    monkeypatch.setattr(compat_threading, "SystemTimer", timers.SystemTimer)
    yield timers


@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(1, 20), (7, 4)])
def test_threading_timer_matches_reference_model(
    timers_accepted: Any, tick_ms: int, wheel_size: int, no_thread_leak: None
) -> None:
    run_state_machine_as_test(
        make_machine(timers_accepted, tick_ms, wheel_size),
        settings=settings(deadline=None, stateful_step_count=40),
    )
