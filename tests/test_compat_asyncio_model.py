"""Hypothesis state machine: the asyncio drop-in against a heapq/dict model.

A :class:`~tickwheel.compat_asyncio.TimerWheel` runs on an event loop whose
clock is an integer number of nanoseconds that only the test moves (no
sleeps, no real time).  Each rule applies the same operation to the wheel
and to a plain reference (a heap of ``(due_ns, id)`` plus a dict of pending
ids):

* ``call_later`` with delays from negative through sub-millisecond to days,
  and infinite/enormous ones (clamped, so they never come due here);
* ``cancel()`` of pending, already-run and already-cancelled handles, whose
  return value must be what the reference says;
* ``postpone()`` of any handle: a pending one moves to its new deadline (as
  a new ``call_later`` would), others return False and stay as they are;
* advancing the clock by 0, a few nanoseconds, milliseconds or a day, either
  in one jump (the loop wakes late) or stepping through every due bucket (the
  loop wakes on time);
* callbacks that, while running, cancel another handle or schedule new ones.

The reference is the documented contract: a handle is due at its exact
deadline, the clock at ``call_later`` plus the delay (its ``when()`` is that
rounded up to the millisecond and then to the tick); a handle already due
when added runs on the next loop iteration; due handles run in deadline
order (not at the end of their tick).  It is checked *online*: whenever a
callback runs, no pending handle may be due before it, its deadline must
have passed (never early), and when the loop wakes on time it must run
exactly at its deadline (never late).  After each rule the wheel's
``len()``, each handle's ``cancelled()`` and ``when()`` and the wheel's
``_check()`` must agree with the reference.

Handles run by exact deadline; equal deadlines run as scheduled unless one
was filed on a coarser level first: the wheel moves it down behind one filed
later straight into the fine bucket (found by this machine; e.g. at loop time
0 ``call_later(1.0, a)`` and ``call_later(0.79, f)``, where ``f`` calls
``call_later(0.21, b)``: ``b`` runs first).  The reference accepts either.

Both cores: the ``c-extension`` variant uses :mod:`tickwheel.compat_asyncio`
as imported (its wheel must sit on the compiled core); the ``pure-python``
variant uses the module itself when it was imported on the twin
(``TICKWHEEL_NO_EXTENSIONS=1``), and otherwise the copy in
``twins.twin_package()`` (built on every twin).
"""

from __future__ import annotations

import asyncio
import math
import selectors
import types
from fractions import Fraction
from typing import Any

import pytest
from dropin_reference import (
    ADVANCES_NS,
    CHILD_ACTIONS,
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
from twins import twin_package

import tickwheel
from tickwheel import compat_asyncio

# The model tier (docs/development.md, "Test tiers"): minutes of Hypothesis.
pytestmark = pytest.mark.model

# The wheel reads the loop's clock as round(loop.time() * 1e9); below this the
# float round trip of an integer nanosecond count is exact (about 23 days).
CLOCK_CAP_NS = 2 * 10**15
DELAYS = SECONDS
ACTIONS = st.one_of(
    st.none(),
    st.tuples(st.just("cancel"), st.integers(0, 999)),
    st.tuples(st.just("add"), DELAYS, CHILD_ACTIONS),
)
# A separate rule, so that most runs reach the deadlines of what they scheduled.
FAR_ADVANCES_NS = st.sampled_from([3_600 * 10**9, 86_400 * 10**9, 10**15])


# -- the event loop on a manual clock --------------------------------------------------
class _NoWaitSelector(selectors.DefaultSelector):
    """Never blocks: the loop's time moves only when the test moves it."""

    def select(self, timeout: float | None = None) -> list[Any]:
        return super().select(0)


class ManualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` is ``now_ns / 1e9``, set by the test."""

    def __init__(self) -> None:
        super().__init__(_NoWaitSelector())
        self.now_ns = START_NS

    def time(self) -> float:
        return self.now_ns / 1e9

    def next_wake_ns(self) -> int | None:
        """When the loop's earliest timer (the wheel's driver) is due, or None."""
        whens = [h.when() for h in self._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
        return round(min(whens) * 1e9) if whens else None

    def run_one_iteration(self) -> None:
        """Run what is ready and what is scheduled at or before ``time()``."""
        self.call_soon(self.stop)
        self.run_forever()


# -- the drop-in module bound to each core ---------------------------------------------
def dropin_for(core: types.ModuleType) -> types.ModuleType:
    """The compat_asyncio module whose TimerWheel runs on ``core``."""
    if issubclass(compat_asyncio.TimerWheel, core.TimerCore):
        module: types.ModuleType = compat_asyncio
    elif core.__name__ == "tickwheel._wheel_py":
        module = twin_package().compat_asyncio
    else:
        pytest.fail(
            "tickwheel.compat_asyncio is not on the compiled core "
            f"(tickwheel.USE_EXTENSIONS={tickwheel.USE_EXTENSIONS})"
        )
    assert issubclass(module.TimerWheel, core.TimerCore)
    return module


# -- the reference ---------------------------------------------------------------------
class Rec:
    """What the test knows about one handle."""

    def __init__(self, hid: int, delay: float, added_ns: int, action: Any) -> None:
        self.hid = hid
        self.delay = delay
        self.added_ns = added_ns
        self.action = action
        self.handle: Any = None
        self.runs = 0
        self.cancelled = False
        # Filled by Reference.add: the rounded deadline (None if clamped).
        self.expiration_ms: int | None = None


# -- the state machine -----------------------------------------------------------------
def make_machine(
    dropin: types.ModuleType, tick_ms: int, wheel_size: int
) -> type[RuleBasedStateMachine]:
    class AsyncioWheelModel(RuleBasedStateMachine):
        handles = Bundle("handles")

        def __init__(self) -> None:
            super().__init__()
            self.loop = ManualClockLoop()
            self.loop.set_exception_handler(self.on_loop_error)
            self.wheel: Any = dropin.TimerWheel(
                self.loop, tick_ms=tick_ms, wheel_size=wheel_size
            )
            self.ref = Reference(tick_ms, exact=True)
            self.recs: list[Rec] = []
            self.errors: list[str] = []
            # True while the loop wakes at every due bucket (stepped advance),
            # so each handle must run exactly at its due time.
            self.on_time = True

        def on_loop_error(
            self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]
        ) -> None:
            self.errors.append(f"loop error: {context!r}")

        # -- operations on wheel and reference alike ------------------------------
        def schedule(self, delay: float, action: Any) -> Rec:
            now = self.loop.now_ns
            rec = Rec(len(self.recs), delay, now, action)
            self.recs.append(rec)
            rec.expiration_ms = self.ref.add(rec.hid, delay, now)
            rec.handle = self.wheel.call_later(delay, self.on_run, rec)
            return rec

        def cancel(self, rec: Rec, where: str) -> None:
            expect = rec.hid in self.ref.pending
            got = rec.handle.cancel()
            if got is not expect:
                self.errors.append(
                    f"{where}: cancel() of {rec.hid} returned {got!r}, "
                    f"expected {expect!r}"
                )
            if expect:
                del self.ref.pending[rec.hid]
                rec.cancelled = True

        def on_run(self, rec: Rec) -> None:
            now = self.loop.now_ns
            rec.runs += 1
            first_ns = self.ref.first_due_ns()
            if self.ref.pending.get(rec.hid) != first_ns:
                self.errors.append(
                    f"handle {rec.hid} (due {self.ref.pending.get(rec.hid)}) ran "
                    f"at {now} ns before one due at {first_ns} ns"
                )
            due_ns = self.ref.pending.pop(rec.hid, None)
            if due_ns is None:
                self.errors.append(f"handle {rec.hid} ran but was not pending")
            elif now < due_ns or (self.on_time and now != due_ns):
                self.errors.append(
                    f"handle {rec.hid} ran at {now} ns, due at {due_ns} ns "
                    f"(loop on time: {self.on_time})"
                )
            if (
                math.isfinite(rec.delay)
                and now < rec.added_ns + Fraction(rec.delay) * 10**9
            ):
                self.errors.append(f"handle {rec.hid} ran early at {now} ns")
            action = rec.action
            if action is None:
                return
            if action[0] == "cancel":
                self.cancel(self.recs[action[1] % len(self.recs)], f"from {rec.hid}")
            else:
                self.schedule(action[1], action[2])

        def run_due(self) -> None:
            """Run loop iterations until the wheel has nothing due at this time."""
            for _ in range(1_000):
                self.loop.run_one_iteration()
                nxt = self.loop.next_wake_ns()
                if nxt is None or nxt > self.loop.now_ns:
                    return
            self.errors.append(
                f"wheel stuck at {self.loop.now_ns} ns: its driver at {nxt} ns "
                "never ran"
            )

        # -- rules ----------------------------------------------------------------
        @rule(target=handles, delay=DELAYS, action=ACTIONS)
        def call_later(self, delay: float, action: Any) -> Rec:
            return self.schedule(delay, action)

        @rule(rec=handles)
        def cancel_handle(self, rec: Rec) -> None:
            self.cancel(rec, "rule")
            assert rec.handle.cancelled() is rec.cancelled

        @rule(rec=handles, delay=DELAYS)
        def postpone_handle(self, rec: Rec, delay: float) -> None:
            # Moves a pending handle to `delay` from now, like a new call_later.
            now = self.loop.now_ns
            expect = rec.hid in self.ref.pending
            got = rec.handle.postpone(delay)
            assert got is expect, (rec.hid, got)
            if expect:
                rec.delay, rec.added_ns = delay, now
                rec.expiration_ms = self.ref.add(rec.hid, delay, now)

        @rule(step_ns=ADVANCES_NS, on_time=st.booleans())
        def advance(self, step_ns: int, on_time: bool) -> None:
            self.advance_by(step_ns, on_time)

        @rule(step_ns=FAR_ADVANCES_NS, on_time=st.booleans())
        def advance_far(self, step_ns: int, on_time: bool) -> None:
            self.advance_by(step_ns, on_time)

        def advance_by(self, step_ns: int, on_time: bool) -> None:
            target = min(self.loop.now_ns + step_ns, CLOCK_CAP_NS)
            self.on_time = on_time
            if on_time:
                # Wake whenever the wheel's driver is due, as a real loop would.
                while True:
                    self.run_due()
                    nxt = self.loop.next_wake_ns()
                    if nxt is None or nxt > target or self.errors:
                        break
                    self.loop.now_ns = nxt
            # Otherwise the loop wakes late, once, at the target.
            self.loop.now_ns = target
            self.run_due()
            assert round(self.loop.time() * 1e9) == target  # the harness is exact
            assert not self.errors, self.errors
            late = self.ref.due(target)
            assert not late, f"due by {target} ns but not run: {late}"

        @invariant()
        def agrees_with_reference(self) -> None:
            assert not self.errors, self.errors
            assert len(self.wheel) == len(self.ref.pending)
            for rec in self.recs:
                pending = rec.hid in self.ref.pending
                assert rec.runs <= 1, rec.hid
                assert rec.runs + rec.cancelled + pending == 1, rec.hid
                assert rec.handle.cancelled() is rec.cancelled, rec.hid
                if pending and rec.expiration_ms is not None:
                    # asyncio's when() is the exact deadline; the tick is the
                    # wheel's own attribute.
                    exact = Fraction(rec.delay) * 10**9
                    deadline_ns = rec.added_ns - (-exact.numerator // exact.denominator)
                    assert rec.handle.when() == deadline_ns / 1e9, rec.hid
                    assert rec.handle.expiration_ms == rec.expiration_ms, rec.hid
            self.wheel._check()

        def teardown(self) -> None:
            try:
                pending = [rec for rec in self.recs if rec.hid in self.ref.pending]
                self.wheel.close()
                assert len(self.wheel) == 0
                assert all(rec.handle.cancelled() for rec in pending)
            finally:
                self.loop.close()

    return AsyncioWheelModel


@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(1, 20), (7, 4)])
def test_asyncio_wheel_matches_reference_model(
    impl: types.ModuleType, tick_ms: int, wheel_size: int
) -> None:
    run_state_machine_as_test(
        make_machine(dropin_for(impl), tick_ms, wheel_size),
        settings=settings(deadline=None, stateful_step_count=40),
    )
