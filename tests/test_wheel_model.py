"""Hypothesis state machine: MockTimer against a plain heapq model.

Each rule applies the same operation to the timer and to the model, then the
tasks that fired (and when, on the discrete-event clock) must match exactly.
Tasks may spawn children while they run, tasks may be re-added (moved), the
clock jumps by zero, small and huge amounts, ``precascade`` moves tasks
down early at random points, and bulk adds fill buckets past the size at
which the compiled poll empties a bucket in one go.
"""

from __future__ import annotations

import heapq
import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

# The model tier (docs/development.md, "Test tiers"): minutes of Hypothesis.
pytestmark = pytest.mark.model

DELAYS = st.one_of(
    st.integers(-5, 40),
    st.integers(0, 5_000),
    st.sampled_from([10**6, 10**9, 3 * 10**10]),
)
ADVANCES = st.one_of(st.integers(0, 50), st.integers(0, 20_000), st.just(4 * 10**10))


def _ceil_to(value: int, tick: int) -> int:
    return -(-value // tick) * tick


def make_machine(timers, tick_ms: int):
    class TimerModel(RuleBasedStateMachine):
        tasks = Bundle("tasks")

        def __init__(self) -> None:
            super().__init__()
            self.timer = timers.MockTimer(start_ms=1_000, tick_ms=tick_ms)
            self.now = 1_000
            self.ids = itertools.count()
            self.seq = itertools.count()
            self.heap: list[tuple[int, int, object]] = []  # (fire_ms, seq, id)
            self.pending: dict[object, int] = {}  # id -> fire_ms of its live entry
            self.spawn: dict[object, int] = {}  # id -> child delay
            self.runs: dict[object, int] = {}  # model: how many times each id ran
            self.fired: list[tuple[object, int]] = []  # actual (id, now_ms)
            self.expected: list[tuple[object, int]] = []
            self.objects: dict[int, object] = {}
            outer = self

            class Task(timers.TimerTask):
                runs = 0

                def run(self) -> None:
                    self.runs += 1
                    outer.fired.append((self.tid, outer.timer.now_ms))
                    child = outer.spawn.get(self.tid)
                    if child is not None:
                        # A child is named by (parent, run number): same-tick
                        # order is unspecified, names must not depend on it.
                        kid = Task(child)
                        kid.tid = (self.tid, self.runs)
                        outer.timer.add(kid)

            self.Task = Task

        # -- model ----------------------------------------------------------------
        def _model_schedule(self, tid: object, at: int, fire_at: int) -> None:
            if fire_at <= at:
                self._model_run(tid, at)  # already due: runs inside add
            else:
                self.pending[tid] = fire_at
                heapq.heappush(self.heap, (fire_at, next(self.seq), tid))

        def _model_run(self, tid: object, at: int) -> None:
            self.expected.append((tid, at))
            self.runs[tid] = self.runs.get(tid, 0) + 1
            child = self.spawn.get(tid)
            if child is not None:
                kid = (tid, self.runs[tid])
                self._model_schedule(kid, at, _ceil_to(at + child, tick_ms))

        def _model_fire_until(self, target: int) -> None:
            while self.heap and self.heap[0][0] <= target:
                at, _, tid = heapq.heappop(self.heap)
                if self.pending.get(tid) != at:
                    continue  # cancelled or moved: a stale heap entry
                del self.pending[tid]
                self._model_run(tid, at)

        # -- rules ------------------------------------------------------------------
        @rule(
            target=tasks, delay=DELAYS, child=st.one_of(st.none(), st.integers(-3, 300))
        )
        def add(self, delay: int, child: int | None):
            tid = next(self.ids)
            task = self.Task(delay)
            task.tid = tid
            self.objects[tid] = task
            if child is not None:
                self.spawn[tid] = child
            self._model_schedule(tid, self.now, _ceil_to(self.now + delay, tick_ms))
            self.timer.add(task)
            return tid

        @rule(
            target=tasks,
            delay=DELAYS,
            count=st.integers(64, 160),
            spread=st.integers(0, 3),
        )
        def bulk_add(self, delay: int, count: int, spread: int):
            # Buckets of 64+ tasks: the compiled poll empties those in one
            # go (walking the list from both ends) instead of node by node.
            tids = []
            for k in range(count):
                tid = next(self.ids)
                d = delay + k % (spread + 1)
                task = self.Task(d)
                task.tid = tid
                self.objects[tid] = task
                self._model_schedule(tid, self.now, _ceil_to(self.now + d, tick_ms))
                self.timer.add(task)
                tids.append(tid)
            return multiple(*tids)

        @rule(tid=tasks)
        def cancel(self, tid: int):
            expect = tid in self.pending
            self.pending.pop(tid, None)
            assert self.objects[tid].cancel() is expect

        @rule(tid=tasks, delay=DELAYS)
        def readd(self, tid: int, delay: int):
            task = self.objects[tid]
            task.delay_ms = delay
            self.pending.pop(tid, None)  # moves: the old entry must not fire
            self._model_schedule(tid, self.now, _ceil_to(self.now + delay, tick_ms))
            self.timer.add(task)

        @rule(budget=st.integers(1, 300), calls=st.integers(1, 5))
        def precascade(self, budget: int, calls: int):
            # Early cascading moves tasks between buckets only: what fires,
            # and when, must not change (the model does nothing).
            for _ in range(calls):
                looked = self.timer.precascade(budget)
                assert 0 <= looked <= budget
                self.timer._check()

        @rule(ms=ADVANCES)
        def advance(self, ms: int):
            target = self.now + ms
            self._model_fire_until(target)
            self.now = target
            self.timer.advance_clock(ms)

        @invariant()
        def agrees(self):
            assert self.timer.now_ms == self.now
            key = lambda f: (f[1], repr(f[0]))  # noqa: E731
            assert sorted(self.fired, key=key) == sorted(self.expected, key=key)
            times = [at for _, at in self.fired]
            assert times == sorted(times), "fired out of deadline order"
            assert len(self.timer) == len(self.pending)
            self.timer._check()

    return TimerModel


@pytest.mark.parametrize("tick_ms", [1, 7])
def test_mock_timer_matches_heap_model(timers, tick_ms):
    run_state_machine_as_test(
        make_machine(timers, tick_ms),
        settings=settings(deadline=None, stateful_step_count=40),
    )
