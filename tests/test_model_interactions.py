"""Hypothesis state machine: tasks that act on *other* tasks while they run.

``tests/test_wheel_model.py`` covers add/cancel/re-add/advance and children
spawned from inside run().  This machine adds what it leaves out: a running
task cancels another task, re-adds (moves) another task, or re-adds itself
(periodic), all on the same MockTimer.

Same-tick order is unspecified, so the model is checked *online*: whenever
the timer runs a task at ``now``, the model must have that task pending at
exactly ``now`` with nothing pending earlier; the task's action is then
applied to timer and model alike (``cancel()`` must return what the model
says).  After each advance nothing due may be left pending in the model.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

# The model tier (docs/development.md, "Test tiers"): minutes of Hypothesis.
pytestmark = pytest.mark.model

DELAYS = st.one_of(
    st.integers(-3, 30), st.integers(0, 3_000), st.sampled_from([10**6, 10**9])
)
ACTIONS = st.one_of(
    st.none(),
    st.tuples(st.just("cancel"), st.integers(0, 10**6)),
    st.tuples(st.just("move"), st.integers(0, 10**6), st.integers(-2, 200)),
    st.tuples(st.just("again"), st.integers(1, 50), st.integers(1, 3)),
)


def _ceil_to(value: int, tick: int) -> int:
    return -(-value // tick) * tick


def make_machine(timers, tick_ms: int):
    class InteractionModel(RuleBasedStateMachine):
        tasks = Bundle("tasks")

        def __init__(self) -> None:
            super().__init__()
            self.timer = timers.MockTimer(start_ms=0, tick_ms=tick_ms)
            self.ids = itertools.count()
            self.objects: list = []
            self.pending: dict[int, int] = {}  # id -> deadline (model)
            self.runs: dict[int, int] = {}
            self.errors: list[str] = []
            outer = self

            class Task(timers.TimerTask):
                def run(self) -> None:
                    outer.on_run(self)

            self.Task = Task

        # -- the online model --------------------------------------------------------
        def deadline(self, delay: int) -> int:
            # A task already due runs at once: the clock never goes back.
            now = self.timer.now_ms
            return max(now, _ceil_to(now + delay, tick_ms))

        def schedule_model(self, tid: int, delay: int) -> None:
            self.pending[tid] = self.deadline(delay)

        def on_run(self, task) -> None:
            now = self.timer.now_ms
            tid = task.tid
            if self.pending.get(tid) != now:
                self.errors.append(
                    f"task {tid} ran at {now}, model {self.pending.get(tid)}"
                )
            if self.pending and min(self.pending.values()) < now:
                self.errors.append(f"task {tid} ran at {now} before an earlier one")
            self.pending.pop(tid, None)
            self.runs[tid] = self.runs.get(tid, 0) + 1
            action = task.action
            if action is None or not self.objects:
                return
            if action[0] != "again":
                # Once per task: two tasks that keep moving each other to
                # "due now" would otherwise run forever inside one add().
                task.action = None
            if action[0] == "cancel":
                other = self.objects[action[1] % len(self.objects)]
                expect = other.tid in self.pending
                self.pending.pop(other.tid, None)
                if other.cancel() is not expect:
                    self.errors.append(
                        f"cancel({other.tid}) from {tid}: expected {expect}"
                    )
            elif action[0] == "move":
                other = self.objects[action[1] % len(self.objects)]
                # Moves a pending task, or arms a finished/cancelled one anew
                # (subclass tasks may be re-added); already due runs inside add.
                other.delay_ms = action[2]
                self.schedule_model(other.tid, action[2])
                self.timer.add(other)
            elif action[0] == "again":
                left = task.left = getattr(task, "left", action[2]) - 1
                if left >= 0:
                    task.delay_ms = action[1]
                    self.schedule_model(tid, action[1])
                    self.timer.add(task)

        # -- rules ---------------------------------------------------------------------
        @rule(target=tasks, delay=DELAYS, action=ACTIONS)
        def add(self, delay: int, action):
            task = self.Task(delay)
            task.tid = next(self.ids)
            task.action = action
            self.objects.append(task)
            self.schedule_model(task.tid, delay)
            self.timer.add(task)
            return task

        @rule(task=tasks)
        def cancel(self, task):
            expect = task.tid in self.pending
            self.pending.pop(task.tid, None)
            assert task.cancel() is expect

        @rule(task=tasks, delay=DELAYS)
        def readd(self, task, delay: int):
            task.delay_ms = delay
            self.schedule_model(task.tid, delay)
            self.timer.add(task)

        @rule(
            ms=st.one_of(st.integers(0, 40), st.integers(0, 5_000), st.just(2 * 10**9))
        )
        def advance(self, ms: int):
            self.timer.advance_clock(ms)
            now = self.timer.now_ms
            due = {t: d for t, d in self.pending.items() if d <= now}
            assert not due, f"due at {now} but not run: {due}"

        @invariant()
        def agrees(self):
            assert not self.errors, self.errors
            assert len(self.timer) == len(self.pending)
            for task in self.objects:
                assert task.pending == (task.tid in self.pending), task
            self.timer._check()

    return InteractionModel


@pytest.mark.parametrize("tick_ms", [1, 5])
def test_model_tasks_acting_on_other_tasks(timers, tick_ms):
    run_state_machine_as_test(
        make_machine(timers, tick_ms),
        settings=settings(deadline=None, stateful_step_count=40),
    )
