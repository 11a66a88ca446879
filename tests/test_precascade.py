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


def test_reaper_survives_an_error_in_early_cascading(
    timers: Any,
    fake_clock: Any,
    no_thread_leak: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = fake_clock
    clock.ns = 0
    timer = timers.SystemTimer(name="pc-err", clock=clock)
    calls = []

    def broken(max_entries: int = 256) -> int:
        calls.append(max_entries)
        raise MemoryError("simulated")

    timer.precascade = broken
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
