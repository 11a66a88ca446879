"""TimerTask.postpone(): move a pending task, on both core implementations.

A heartbeat or an idle timeout moves its timer on every message; postpone()
does that in one call on the task itself.  MockTimer and
the manual-clock TimerCore carry the semantics; no test waits for real time.
"""

from __future__ import annotations

import gc
import math
import threading
import time

import pytest

from tickwheel import MAX_DELAY_MS


def test_postpone_later_moves_the_deadline(timers):
    timer = timers.MockTimer()
    fired = []
    task = timer.schedule(100, fired.append, "a")
    assert task.postpone(250) is True
    assert (task.delay_ms, task.expiration_ms, task.state) == (250, 250, "pending")
    assert len(timer) == 1
    timer._check()
    timer.advance_clock(249)
    assert fired == []
    timer.advance_clock(1)
    assert fired == ["a"] and len(timer) == 0
    timer._check()


def test_postpone_sooner_and_from_the_current_time(timers):
    timer = timers.MockTimer()
    fired = []
    task = timer.schedule(10_000, fired.append, "a")  # on an overflow level
    timer.advance_clock(30)
    assert task.postpone(5) is True
    assert task.expiration_ms == 35  # measured from now, not from the add
    timer._check()
    timer.advance_clock(4)
    assert fired == []
    timer.advance_clock(1)
    assert fired == ["a"]


def test_postpone_repeatedly_like_a_heartbeat(timers):
    timer = timers.MockTimer()
    fired = []
    idle = timer.schedule(50, fired.append, "idle")
    for _ in range(100):
        timer.advance_clock(40)
        assert idle.postpone(50) is True
        timer._check()
    assert fired == [] and len(timer) == 1
    timer.advance_clock(50)
    assert fired == ["idle"] and timer.now_ms == 4050


def test_postpone_takes_back_a_due_task_not_yet_run(timers):
    core = timers.core.TimerCore(manual=True)
    task = timers.TimerTask(-1, print)
    core.add(task)
    assert task.state == "expired" and len(core) == 1
    assert task.postpone(20) is True
    assert task.state == "pending" and len(core) == 1
    # Still in the ready list, but _run skips a task that is no longer due.
    assert core._run(core._take_ready(), None) == 0
    core._check()
    core.now_ns = 20_000_000
    assert core._take_due(core.now_ms) == [task]


def test_postpone_returns_false_after_run_or_cancel(timers):
    timer = timers.MockTimer()
    ran = timer.schedule(1, lambda: None)
    timer.advance_clock(1)
    assert ran.done and ran.postpone(10) is False and ran.state == "done"
    cancelled = timer.schedule(10, lambda: None)
    cancelled.cancel()
    assert cancelled.postpone(10) is False and cancelled.state == "cancelled"
    assert len(timer) == 0
    timer._check()


def test_postpone_from_inside_its_own_run_returns_false(timers):
    timer = timers.MockTimer()
    results = []
    task = timer.schedule(5, lambda: results.append(task.postpone(5)))
    timer.advance_clock(20)
    assert results == [False] and task.done


def test_postpone_never_added_raises(timers):
    task = timers.TimerTask(5, print)
    with pytest.raises(RuntimeError, match="never added to a timer.*timer.add"):
        task.postpone(10)
    assert task.state == "idle"


def test_postpone_after_timer_closed_returns_false(timers):
    timer = timers.MockTimer()
    task = timer.schedule(10, print)
    timer.close()
    assert task.cancelled and task.postpone(10) is False


def test_postpone_after_timer_is_gone_raises(timers):
    timer = timers.MockTimer()
    task = timer.schedule(10, print)
    del timer
    gc.collect()
    if task.state != "pending":  # the dying timer let go of it
        assert task.postpone(10) is False
        return
    with pytest.raises(RuntimeError, match="not pending in a live timer"):
        task.postpone(10)


def test_postpone_bad_delay_leaves_the_task_in_place(timers):
    timer = timers.MockTimer()
    task = timer.schedule(100, print)
    with pytest.raises(TypeError, match="delay_ms must be a number.*'soon'"):
        task.postpone("soon")
    with pytest.raises(ValueError, match="delay_ms must be finite, got nan"):
        task.postpone(math.nan)
    with pytest.raises(OverflowError, match="delay_ms"):
        task.postpone(MAX_DELAY_MS + 1)
    assert (task.delay_ms, task.expiration_ms, task.state) == (100, 100, "pending")
    timer._check()


def test_postpone_past_the_clock_end_leaves_delay_and_place(timers):
    now_ns = 2**62  # the latest clock reading the cores accept
    core = timers.core.TimerCore(start_ms=2**62 // 10**6, clock=lambda: now_ns)
    task = timers.TimerTask(100, print)
    core.add(task)
    before = task.expiration_ms
    with pytest.raises(OverflowError, match="past the end of the clock range"):
        task.postpone(MAX_DELAY_MS)
    assert (task.delay_ms, task.expiration_ms, task.state) == (100, before, "pending")
    core._check()


def test_postpone_wakes_the_driver_only_for_an_earlier_bucket(timers):
    class Core(timers.core.TimerCore):
        wakes = 0

        def _on_wake(self):
            type(self).wakes += 1

    core = Core(manual=True)
    task = timers.TimerTask(500, print)
    core.add(task)
    other = timers.TimerTask(100, print)
    core.add(other)
    Core.wakes = 0
    assert task.postpone(900) is True  # behind `other`: the driver sleeps on
    assert Core.wakes == 0
    assert task.postpone(3) is True  # now the earliest bucket
    assert Core.wakes == 1
    assert task.postpone(-1) is True  # already due
    assert Core.wakes == 2 and task.state == "expired"
    core._check()


def test_postpone_subclass_task_that_overrides_run(timers):
    class Beat(timers.TimerTask):
        __slots__ = ("n",)

        def run(self):
            self.n += 1

    timer = timers.MockTimer()
    beat = Beat(10)
    beat.n = 0
    timer.add(beat)
    assert beat.postpone(30) is True
    timer.advance_clock(29)
    assert beat.n == 0
    timer.advance_clock(1)
    assert beat.n == 1
    assert beat.postpone(10) is False  # done: re-add it with timer.add()
    timer.add(beat)
    assert beat.postpone(15) is True
    timer.advance_clock(15)
    assert beat.n == 2


def test_postpone_of_a_due_task_leaves_the_ready_list(timers):
    # Found by the asyncio model: a due task taken back into a bucket left a
    # stale entry in the ready list, which ran it ahead of a task due before
    # it once both were due (the same for timer.add() of a due task).
    core = timers.core.TimerCore(manual=True)
    late = timers.TimerTask(-1, print)
    core.add(late)
    assert late.postpone(7) is True
    early = timers.TimerTask(-1, print)
    core.add(early)
    core._check()
    core.now_ns = 10_000_000
    assert core._take_due(core.now_ms) == [early, late]


@pytest.mark.parametrize("how", ["postpone", "add"])
def test_due_task_moved_while_due_is_listed_once(timers, how):
    core = timers.core.TimerCore(manual=True)
    task = timers.TimerTask(-1, print)
    core.add(task)
    if how == "postpone":
        assert task.postpone(-2) is True
    else:
        task.delay_ms = -2
        core.add(task)
    assert task.state == "expired" and len(core) == 1
    core._check()
    assert core._take_due(core.now_ms) == [task]


@pytest.mark.slow
def test_postpone_sooner_wakes_a_sleeping_system_timer(timers, no_thread_leak):
    # Real threads: the timer sleeps until its one task is due in an hour;
    # moving the task to 1 ms must wake it (postpone calls _on_wake), or this
    # waits for the 30 s liveness bound and fails.  No duration is asserted.
    fired = threading.Event()
    with timers.SystemTimer() as timer:
        task = timer.schedule(3_600_000, fired.set)
        time.sleep(0.05)  # let the thread keeping time go to sleep
        assert task.postpone(1) is True
        assert fired.wait(30)
