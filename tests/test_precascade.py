"""Early cascading: ``TimerCore.precascade`` and the reaper's use of it.

Kafka moves an overflow bucket's tasks down a level when the bucket's slot
starts, all at once.  ``precascade`` moves them earlier, in chunks, while the
driver is idle.  These tests pin what it may and may not change: it moves
tasks between buckets only (same deadlines, same order, same count), its work
per pass is bounded, and the SystemTimer reaper uses it (or not) as asked.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _overflow_sizes(timer: Any) -> list[int]:
    """Tasks linked at each level >= 1 (level 1 first)."""
    sizes = []
    wheel = timer.wheel.overflow_wheel
    while wheel is not None:
        sizes.append(sum(len(wheel.bucket(i)) for i in range(wheel.wheel_size)))
        wheel = wheel.overflow_wheel
    return sizes


def _load(
    timer: Any, n: int, seed: int = 3, dues: list[int] | None = None
) -> list[tuple[int, int]]:
    """n tasks due 1000-1500 ms ahead (level 2 with Kafka's 1 ms x 20 wheel).

    :return: the list that collects (deadline, fire time) as they run
    """
    rnd = random.Random(seed)
    fired: list[tuple[int, int]] = []
    for _ in range(n):
        due = timer.now_ms + 1_000 + rnd.randrange(500)
        if dues is not None:
            dues.append(due)
        timer.schedule(
            due - timer.now_ms, lambda due=due: fired.append((due, timer.now_ms))
        )
    return fired


def _drive(timer: Any, until_ms: int, precascade: bool) -> int:
    """Advance 1 ms at a time; optionally precascade to exhaustion at each ms."""
    looked = 0
    while timer.now_ms < until_ms:
        timer.advance_clock(1)
        if precascade:
            while True:
                k = timer.precascade(64)
                if not k:
                    break
                looked += k
            timer._check()
    return looked


def test_precascade_changes_nothing_observable(timers: Any) -> None:
    runs = []
    for early in (False, True):
        timer = timers.MockTimer(start_ms=0)
        fired = _load(timer, 3_000)
        looked = _drive(timer, 1_600, early)
        assert len(timer) == 0
        runs.append((fired, looked))
    (plain, _), (early_fired, looked) = runs
    assert looked > 3_000  # it did move tasks (most of them more than once)
    assert sorted(early_fired) == sorted(plain)
    assert all(at == due for due, at in early_fired)  # on time, never early
    assert [at for _, at in early_fired] == sorted(at for _, at in early_fired)


def test_precascade_empties_the_next_overflow_bucket_before_its_slot(
    timers: Any,
) -> None:
    timer = timers.MockTimer(start_ms=0)
    fired = _load(timer, 2_000)
    assert _overflow_sizes(timer)[-1] == 2_000  # all on level 2
    # Nothing fits lower yet: level 1 reaches 400 ms, the slots start at 800.
    assert timer.precascade() == 0
    timer.advance_clock(1_000)  # the first bucket cascaded at 800 by itself
    level2_before = _overflow_sizes(timer)[1]
    assert level2_before > 0
    looked = 0
    while k := timer.precascade(100):
        assert k <= 100
        looked += k
        timer._check()
    after = _overflow_sizes(timer)
    # Level 1 now reaches 1400 ms: about half of the slot 1200-1600 (the
    # tasks due before 1400) has moved down; the rest waits on level 2.
    assert 0 < after[1] < level2_before * 3 // 4
    assert looked >= level2_before
    assert len(timer) + len(fired) == 2_000
    timer.advance_clock(600)
    assert len(timer) == 0


def test_precascade_work_is_bounded_until_the_reach_grows(timers: Any) -> None:
    timer = timers.MockTimer(start_ms=0)
    _load(timer, 1_000)
    timer.advance_clock(1_000)
    while timer.precascade(50):
        pass
    # A full pass is done: nothing more to do until level 1's reach has
    # grown by an eighth of the bucket's 400 ms span.
    assert timer.precascade(50) == 0
    timer.advance_clock(20)
    assert timer.precascade(50) == 0
    timer.advance_clock(40)
    assert timer.precascade(50) > 0


def test_precascade_on_an_idle_or_shallow_timer_does_nothing(timers: Any) -> None:
    timer = timers.MockTimer(start_ms=0)
    assert timer.precascade() == 0
    timer.schedule(5, lambda: None)  # level 0 only
    assert timer.precascade() == 0
    assert len(timer) == 1


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ("8", TypeError),
        (None, TypeError),
        (2**70, OverflowError),
    ],
)
def test_precascade_rejects_bad_max_entries(
    timers: Any, value: object, error: type[Exception]
) -> None:
    timer = timers.MockTimer(start_ms=0)
    _load(timer, 10)
    with pytest.raises(error, match="max_entries"):
        timer.precascade(value)
    assert len(timer) == 10
    timer._check()


def test_cascade_early_must_be_bool(timers: Any) -> None:
    with pytest.raises(TypeError, match="cascade_early"):
        timers.SystemTimer(cascade_early=1)


def _wait_for(predicate: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


@pytest.mark.parametrize("early", [True, False])
def test_reaper_cascades_early_only_when_asked(
    timers: Any, early: bool, fake_clock: Any, no_thread_leak: None
) -> None:
    clock = fake_clock
    clock.ns = 0
    timer = timers.SystemTimer(name="pc", clock=clock, cascade_early=early)
    try:
        dues: list[int] = []
        fired = _load(timer, 2_000, dues=dues)
        # At 1000 ms the level-2 slot starting at 800 has cascaded; level 1
        # then reaches 1400 ms, half of the next level-2 slot (1200-1600).
        clock.advance_ms(990)
        done = threading.Event()
        timer.schedule(10, done.set)
        clock.advance_ms(10)
        timer.schedule(0, lambda: None)  # wakes the reaper
        assert done.wait(10)
        in_slot = sum(1 for d in dues if d >= 1_200)
        beyond_reach = sum(1 for d in dues if d >= 1_400)
        assert 0 < beyond_reach < in_slot
        if early:
            # The reaper is idle (the fake clock stands still): it moves the
            # tasks due before level 1's reach down a level, the rest stay.
            assert _wait_for(lambda: _overflow_sizes(timer)[1] == beyond_reach)
        else:
            time.sleep(0.05)  # give a wrongly eager reaper time to move them
            assert _overflow_sizes(timer)[1] == in_slot
        assert not [f for f in fired if f[1] < f[0]]
        assert len(timer) == 2_000 - len(fired)
    finally:
        timer.close()


def _broken(timer: Any) -> list[int]:
    """Make ``timer.precascade`` raise MemoryError, recording each call's
    argument in the list returned."""
    calls: list[int] = []

    def broken(max_entries: int = 256) -> int:
        calls.append(max_entries)
        raise MemoryError("simulated")

    timer.precascade = broken
    return calls


@pytest.mark.parametrize("chunk", [0, 256])
def test_an_error_in_the_idle_turns_early_cascading_turns_it_off(
    timers: Any, fake_clock: Any, no_thread_leak: None, chunk: int
) -> None:
    """The idle worker's turn (the core's ``_keep_time``) raises an error of
    early cascading for the worker to log, and turns early cascading off;
    with chunk 0 it never cascades."""
    timer = timers.SystemTimer(
        name="pc-turn-err", clock=fake_clock, reaper=False, executor="inline"
    )
    calls = _broken(timer)

    def turn(chunk: int) -> Any:
        return timers.core._keep_time(timer, timer._handover, chunk, 100_000)

    try:
        timer.schedule(10, lambda: None)
        if chunk:
            with pytest.raises(MemoryError, match="simulated"):
                turn(chunk)
            assert calls == [chunk] and timer._cascade_early is False
        assert turn(0) == 10_000_000
        assert calls == ([chunk] if chunk else [])
    finally:
        timer.close()


def test_reaper_survives_an_error_in_early_cascading(
    timers: Any,
    fake_clock: Any,
    no_thread_leak: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = fake_clock
    clock.ns = 0
    timer = timers.SystemTimer(name="pc-err", clock=clock)
    calls = _broken(timer)
    try:
        done = threading.Event()
        timer.schedule(50, done.set)
        timer.schedule(0, lambda: None)  # wakes the reaper: idle, 50 ms to go
        assert _wait_for(lambda: bool(calls))
        clock.advance_ms(50)
        timer.schedule(0, lambda: None)
        assert done.wait(10)  # the reaper still fires tasks
        assert len(calls) == 1  # and no longer tries to cascade early
        assert "early cascade disabled" in caplog.text
    finally:
        timer.close()


def _level_moves(timer: Any) -> int:
    """Sum over linked tasks of their level: a task moving down one level
    lowers it by one, so a poll's drop in it counts the moves it made."""
    total, level = 0, 1
    wheel = timer.wheel.overflow_wheel
    while wheel is not None:
        total += level * sum(len(wheel.bucket(i)) for i in range(wheel.wheel_size))
        wheel = wheel.overflow_wheel
        level += 1
    return total


def _worst_poll_moves(timers: Any, start: int, n: int, wake_for_work: bool) -> int:
    """Drive a MockTimer as the reaper does (jump to the next wake-up, poll,
    run, precascade to exhaustion) and return the most moves one poll made.

    ``wake_for_work``: wake at ``next_precascade_ms`` too, not only when a
    bucket is due.
    """
    rnd = random.Random(3)
    timer = timers.MockTimer(start_ms=start)
    fired: list[tuple[int, int]] = []
    for _ in range(n):
        delay = 1_000 + rnd.randrange(500)
        due = start + delay
        timer.schedule(delay, lambda due=due: fired.append((due, timer.now_ms)))
    worst = 0
    ms = start
    while len(timer):
        wake = [timer.next_expiration_ms]
        if wake_for_work:
            wake.append(timer.next_precascade_ms)
        ms = max(ms, min(x for x in wake if x is not None))
        timer.now_ns = ms * 1_000_000
        before = _level_moves(timer)
        due = timer._take_due(ms)
        worst = max(worst, before - _level_moves(timer))
        timer._run(due, None)
        while timer.precascade():
            pass
    timer._check()
    assert len(fired) == n and all(at == due for due, at in fired)
    return worst


@pytest.mark.parametrize("start", [0, 100, 200, 300])
def test_waking_for_precascade_work_keeps_every_poll_small(
    timers: Any, start: int
) -> None:
    """Where the window falls against the level-2 slots decides which big
    bucket comes due inside it; whichever it is, a driver that also wakes at
    next_precascade_ms leaves a poll little to cascade.  One that wakes only
    for due buckets leaves up to most of a bucket to its slot start (the
    stall of several ms the real-time reaper showed before it woke for it)."""
    n = 8_000
    assert _worst_poll_moves(timers, start, n, wake_for_work=True) <= n // 16
    assert _worst_poll_moves(timers, start, n, wake_for_work=False) > n // 16


def test_next_precascade_ms_is_when_a_bucket_comes_within_reach(timers: Any) -> None:
    timer = timers.MockTimer(start_ms=0)
    assert timer.next_precascade_ms is None  # idle
    timer.schedule(5, lambda: None)
    assert timer.next_precascade_ms is None  # level 0 only
    timer = timers.MockTimer(start_ms=0)
    _load(timer, 2_000)  # level-2 slots 800-1200 and 1200-1600
    # The slot starting at 800 is eligible once level 1 (400 ms reach, 20 ms
    # tick) reaches half of it: 800 + 200 - 400 = 600.
    assert timer.next_precascade_ms == 600
    for ms in (1, 300, 599):
        timer.now_ns = ms * 1_000_000  # nothing is due before 800
        assert timer.precascade() == 0
        assert timer.next_precascade_ms == 600
    timer.now_ns = 600 * 1_000_000
    assert timer.precascade() > 0
    while timer.precascade():
        pass
    # Passed over until level 1's reach grows by 400 / 8 = 50 ms, which it
    # does in steps of its 20 ms tick: 1000 -> 1060 at 660.
    assert timer.next_precascade_ms == 660
    timer.now_ns = 659 * 1_000_000
    assert timer.precascade() == 0
    timer.now_ns = 660 * 1_000_000
    assert timer.precascade() > 0
    timer._check()


@pytest.mark.parametrize("early", [True, False])
@pytest.mark.parametrize("keeper", ["worker", "reaper"])
def test_timekeeper_sleeps_only_until_precascade_has_work(
    timers: Any, early: bool, keeper: str, fake_clock: Any, no_thread_leak: None
) -> None:
    """The thread that keeps time (the idle worker of the default executor,
    else the reaper) sleeps until the sooner of the next due bucket and the
    next time early cascading has work."""
    fake_clock.ns = 0
    timer = timers.SystemTimer(
        name="pc",
        clock=fake_clock,
        cascade_early=early,
        executor=None if keeper == "worker" else "inline",
    )
    cond = timer._work_cond if keeper == "worker" else timer._reaper_cond
    timeouts: list[float | None] = []
    wait = cond.wait

    def recording_wait(timeout: float | None = None) -> bool:
        timeouts.append(timeout)
        return wait(timeout)

    cond.wait = recording_wait
    try:
        _load(timer, 2_000)
        assert timer.next_expiration_ms == 800
        assert timer.next_precascade_ms == 600
        with cond:
            cond.notify_all()
        # Early cascading has work at 600 ms; without it, the next thing
        # to wake for is the bucket due at 800 ms.
        expected = 0.6 if early else 0.8
        assert _wait_for(lambda: expected in timeouts)
        assert 0.6 not in timeouts or early
    finally:
        timer.close()


# `timers` only names the two cores' classes: nothing to reset between examples.
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    start=st.integers(0, 10_000),
    delays=st.lists(st.integers(1, 30_000), min_size=1, max_size=200),
    tick_ms=st.sampled_from([1, 3]),
    wheel_size=st.sampled_from([4, 20]),
)
def test_precascade_finds_no_work_before_next_precascade_ms(
    timers: Any, start: int, delays: list[int], tick_ms: int, wheel_size: int
) -> None:
    """Between wake-ups (no bucket due, next_precascade_ms not reached) the
    reaper could call precascade at every ms and find nothing to do: so
    sleeping until the sooner of the two loses no early cascading."""
    timer = timers.MockTimer(start_ms=start, tick_ms=tick_ms, wheel_size=wheel_size)
    for delay in delays:
        timer.schedule(delay, lambda: None)
    ms = start
    while len(timer):
        while timer.precascade():
            pass
        nxt = timer.next_precascade_ms
        due = timer.next_expiration_ms
        assert due is not None
        assert nxt is None or nxt > ms
        quiet_until = due if nxt is None else min(due, nxt)
        for t in range(ms + 1, min(quiet_until, ms + 200)):
            timer.now_ns = t * 1_000_000
            assert timer.precascade() == 0, (t, nxt, due)
        ms = max(ms, quiet_until)
        timer.now_ns = ms * 1_000_000
        timer._run(timer._take_due(ms), None)
        timer._check()


@pytest.mark.parametrize("early", [True, False])
def test_the_worker_cascades_early_between_batches(
    timers: Any, early: bool, fake_clock: Any, no_thread_leak: None
) -> None:
    """No reaper: after running a batch, the executor's worker polls what
    came due and does the early cascading itself (nobody else would until
    the next advance_clock)."""
    fake_clock.ns = 0
    timer = timers.SystemTimer(
        name="wc", clock=fake_clock, reaper=False, cascade_early=early
    )
    try:
        _load(timer, 2_000)  # level-2 slots 800-1200 and 1200-1600
        before = _overflow_sizes(timer)[1]
        done = threading.Event()
        timer.schedule(700, done.set)
        fake_clock.advance_ms(700)  # slot 800 is within reach since 600
        assert timer.advance_clock(0)
        assert done.wait(10)
        if early:
            assert _wait_for(lambda: _overflow_sizes(timer)[1] < before)
            assert _wait_for(lambda: timer.precascade() == 0)
        else:
            time.sleep(0.05)  # give a wrongly eager worker time to move them
            assert _overflow_sizes(timer)[1] == before
        assert len(timer) == 2_000
        timer._check()
    finally:
        timer.close()


def _counted(timer: Any) -> list[int]:
    """Make ``timer.precascade`` record what each call looked at (the list
    returned); ``timer.precascade.__wrapped__`` is the method itself."""
    looked: list[int] = []
    precascade = timer.precascade

    def counted(max_entries: int) -> int:
        looked.append(precascade(max_entries))
        return looked[-1]

    counted.__wrapped__ = precascade  # type: ignore[attr-defined]
    timer.precascade = counted
    return looked


def test_a_short_precascade_chunk_ends_the_idle_threads_pass(
    timers: Any, fake_clock: Any, no_thread_leak: None
) -> None:
    """The thread keeping time asks for another chunk only after a full one:
    a shorter chunk ended the pass, and another call would find nothing
    until the lower level's reach grows, so it waits instead."""
    fake_clock.ns = 0
    timer = timers.SystemTimer(
        name="pc-chunk", clock=fake_clock, reaper=False, executor="inline"
    )
    chunk = timers.timer._CASCADE_CHUNK
    looked = _counted(timer)
    precascade = timer.precascade.__wrapped__
    try:
        _load(timer, 2_000)
        fake_clock.advance_ms(1_000)
        timer.advance_clock(0)  # the slot at 800 cascades; level 1 reaches 1400
        more = [timers.core._precascade_chunk(timer, chunk)]
        while more[-1]:
            more.append(timers.core._precascade_chunk(timer, chunk))
        assert len(more) > 1  # a level-2 slot of ~800 tasks: several chunks
        assert more == [n >= chunk for n in looked]
        assert looked[-1] < chunk  # the pass ended on a short chunk ...
        assert precascade(chunk) == 0  # ... and nothing is left of it
    finally:
        timer.close()


def test_the_idle_turn_asks_for_another_chunk_after_a_whole_one(
    timers: Any, fake_clock: Any, no_thread_leak: None
) -> None:
    """The idle worker's turn (the core's ``_keep_time``) cascades a chunk
    when the next bucket is ``idle_ns`` or more away: 0 after a whole one
    (call again), then, after a short one ended the pass, how long to wait."""
    fake_clock.ns = 0
    timer = timers.SystemTimer(
        name="pc-turn", clock=fake_clock, reaper=False, executor="inline"
    )
    looked = _counted(timer)

    def turn(idle_ns: int) -> Any:
        return timers.core._keep_time(timer, timer._handover, 64, idle_ns)

    try:
        _load(timer, 2_000)
        fake_clock.advance_ms(1_000)
        timer.advance_clock(0)
        pending = len(timer)
        # Not idle long enough (the next bucket is nearer than idle_ns): no
        # cascading, only the wait.
        due_in = timer.next_expiration_ms * 1_000_000 - fake_clock.ns
        assert turn(due_in + 1) == due_in and looked == []
        turns = [turn(0)]
        while turns[-1] == 0 and len(turns) < 1_000:
            turns.append(turn(0))
        assert len(turns) > 2 and set(turns[:-1]) == {0}  # whole chunks ...
        assert looked[:-1] == [64] * (len(turns) - 1) and looked[-1] < 64
        assert isinstance(turns[-1], int) and turns[-1] > 0  # ... then a wait
        assert len(timer) == pending  # moved down a level, none lost or run
        timer._check()
    finally:
        timer.close()
