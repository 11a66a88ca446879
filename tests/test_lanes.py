"""Lanes: one SystemTimer split so that threads adding to it share no lock.

``TimerCore._use_lanes(n)`` gives a timer ``n`` lanes, each a wheel, bucket
queue, count and lock of its own; SystemTimer uses one per CPU on
free-threaded builds (``tickwheel.timer._LANES``, set to 4 here so the lanes
are tested on every interpreter).  What must hold whatever the lanes:
a thread's tasks stay in its lane, tasks of all lanes expire merged in
deadline order, cancel/postpone/re-add from any thread reach the task's own
lane, one task added from several threads at once lands once, and the
queries (``len``, ``next_expiration_ms``, ``close``) see every lane.

The twin keeps one lane (``_lane_count`` 1, ``_lane_of`` 0): the same tests
run on it and check the same behaviour.  Clock: a fake one (``FakeClock``),
driven by hand with ``reaper=False`` and ``executor="inline"``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

LANES = 4


def _compiled(timers: Any) -> bool:
    return not timers.core.__name__.endswith("_py")


@pytest.fixture
def laned(timers, monkeypatch, fake_clock):
    monkeypatch.setattr(timers.timer, "_LANES", LANES)
    timer = timers.SystemTimer(
        "lanes", reaper=False, executor="inline", clock=fake_clock
    )
    yield timer
    timer.close()


def in_new_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a new thread (a new lane number); its result or error."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except BaseException as exc:  # re-raised on the caller's thread
            errors.append(exc)

    t = threading.Thread(target=run, name="lanes-test")
    t.start()
    t.join(30)
    assert not t.is_alive()
    if errors:
        raise errors[0]
    return out[0]


def drain(timer: Any, fake_clock: Any, ms: int) -> None:
    fake_clock.advance_ms(ms)
    while timer.advance_clock(0):
        pass


def test_lane_count(laned, timers):
    assert laned._lane_count == (LANES if _compiled(timers) else 1)


def test_each_thread_schedules_into_its_own_lane(laned, timers):
    # Threads are numbered as they first add: LANES new threads in a row
    # take LANES different lanes, and each keeps to its own.
    per_thread = [
        in_new_thread(lambda: [laned.schedule(50, print) for _ in range(3)])
        for _ in range(LANES)
    ]
    lanes = [{laned._lane_of(t) for t in tasks} for tasks in per_thread]
    assert all(len(s) == 1 for s in lanes), lanes
    used = {s.pop() for s in lanes}
    assert used == (set(range(LANES)) if _compiled(timers) else {0})
    assert len(laned) == 3 * LANES
    laned._check()


def test_tasks_of_every_lane_run_merged_in_deadline_order(laned, fake_clock):
    ran: list[int] = []
    start = laned.now_ms

    def schedule_from(k: int) -> None:
        # Thread k: deadlines k+1, k+1+LANES, ...: interleaved across lanes.
        for d in range(k + 1, 60, LANES):
            laned.schedule(d, ran.append, d)

    for k in range(LANES):
        in_new_thread(schedule_from, k)
    assert laned.next_expiration_ms == start + 1
    drain(laned, fake_clock, 100)
    assert ran == list(range(1, 60))
    assert len(laned) == 0


def test_next_expiration_is_the_earliest_of_all_lanes(laned, fake_clock):
    start = laned.now_ms
    for delay in (30, 10, 20):
        in_new_thread(laned.schedule, delay, print)
    assert laned.next_expiration_ms == start + 10
    fake_clock.advance_ms(15)
    laned.advance_clock(0)
    assert laned.next_expiration_ms == start + 20
    assert len(laned) == 2


def test_cancel_from_another_thread_reaches_the_tasks_lane(laned, fake_clock):
    ran: list[int] = []
    tasks = []
    for k in range(LANES):
        tasks += in_new_thread(
            lambda k=k: [
                laned.schedule(5 + i, ran.append, k * 100 + i) for i in range(20)
            ]
        )
    cancelled = {t for i, t in enumerate(tasks) if i % 3 == 0}
    assert all(t.cancel() for t in cancelled)
    assert len(laned) == len(tasks) - len(cancelled)
    drain(laned, fake_clock, 100)
    expected = sorted(k * 100 + i for k in range(LANES) for i in range(20)
                      if (k * 20 + i) % 3 != 0)
    assert sorted(ran) == expected
    assert len(ran) == len(set(ran))
    assert all(t.cancelled for t in cancelled)
    assert len(laned) == 0


def test_postpone_and_re_add_keep_the_task_in_its_lane(laned, fake_clock):
    ran: list[str] = []
    in_new_thread(laned.schedule, 5, ran.append, "first")  # lane 0 taken
    task = in_new_thread(laned.schedule, 10, ran.append, "moved")
    lane = laned._lane_of(task)
    assert task.postpone(40)  # from this thread: the task's lane, not ours
    assert laned._lane_of(task) == lane
    task.delay_ms = 60
    laned.add(task)  # re-added from this thread: moved within its lane
    assert laned._lane_of(task) == lane
    assert len(laned) == 2
    drain(laned, fake_clock, 59)
    assert ran == ["first"]
    drain(laned, fake_clock, 2)
    assert ran == ["first", "moved"]
    assert len(laned) == 0


def test_one_task_added_from_many_threads_at_once_lands_once(laned, timers, fake_clock):
    runs: list[int] = []
    for round_ in range(50):
        task = timers.TimerTask(5, runs.append, round_)
        barrier = threading.Barrier(LANES)

        def add(task: Any = task, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            laned.add(task)

        threads = [threading.Thread(target=add) for _ in range(LANES)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(laned) == 1
        assert laned._lane_of(task) is not None
        laned._check()
        drain(laned, fake_clock, 10)
        assert len(laned) == 0
    assert runs == list(range(50))


def test_a_task_re_adding_itself_from_its_callable(laned, timers, fake_clock):
    runs: list[int] = []
    task: Any = None

    def again() -> None:
        runs.append(laned.now_ms)
        if len(runs) < 3:
            laned.add(task)  # RUNNING, in no lane: placed anew

    task = timers.TimerTask(5, again)
    in_new_thread(laned.add, task)
    for _ in range(4):
        drain(laned, fake_clock, 5)
    assert len(runs) == 3
    assert runs == sorted(runs) and len(set(runs)) == 3
    assert len(laned) == 0


def test_close_cancels_every_lane_and_every_lane_refuses_adds(laned):
    tasks = []
    for _ in range(LANES):
        tasks += in_new_thread(lambda: [laned.schedule(50, print) for _ in range(5)])
    laned.close()
    assert len(laned) == 0
    assert all(t.cancelled for t in tasks)
    for _ in range(LANES):
        with pytest.raises(RuntimeError, match="closed"):
            in_new_thread(laned.schedule, 5, print)


def test_cancel_all_precascade_and_check_visit_every_lane(laned, fake_clock):
    for k in range(LANES):
        in_new_thread(
            lambda k=k: [laned.schedule(3_000 + 7 * i + k, print) for i in range(30)]
        )
    laned._check()
    # Due 4000-4210 ms on the clock (it starts at 1000): a level-2 bucket of
    # 400 ms at 4000, eligible once level 1 reaches half of it (4200).
    fake_clock.advance_ms(2_900)
    looked = 0
    while (step := laned.precascade(16)) > 0:
        looked += step
    assert looked >= 1
    laned._check()
    assert len(laned) == 30 * LANES
    assert laned.cancel_all() == 30 * LANES
    assert len(laned) == 0
    assert laned.next_expiration_ms is None or laned.next_expiration_ms >= laned.now_ms


@pytest.mark.parametrize("n", [0, -1])
def test_use_lanes_refuses_a_count_below_one(timers, n):
    timer = timers.SystemTimer("lanes", reaper=False, executor="inline")
    try:
        with pytest.raises(ValueError, match=f"n must be >= 1, got {n}"):
            timer._use_lanes(n)
        with pytest.raises(TypeError, match="n must be an int, got '2'"):
            timer._use_lanes("2")
    finally:
        timer.close()


def test_use_lanes_is_for_a_new_real_time_timer(timers):
    mock = timers.MockTimer()
    with pytest.raises(ValueError, match="manual clock"):
        mock._use_lanes(2)
    timer = timers.SystemTimer("lanes", reaper=False, executor="inline")
    try:
        timer.schedule(1_000, print)
        with pytest.raises(ValueError, match="new timer"):
            timer._use_lanes(2)
    finally:
        timer.close()


def test_a_lane_wakes_the_timer_it_serves(timers, monkeypatch):
    # A task added in another lane, due now, must wake the reaper at once:
    # the lane's wake-up goes to the SystemTimer's _on_wake.
    monkeypatch.setattr(timers.timer, "_LANES", LANES)
    done = threading.Event()
    with timers.SystemTimer("lanes-wake") as timer:
        in_new_thread(timer.schedule, 600_000, print)  # parks the reaper
        for _ in range(LANES):
            in_new_thread(timer.schedule, 0, done.set)
        assert done.wait(10)
