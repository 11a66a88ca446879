"""The idle time keeper's turn (the core's ``_keep_time``), driven by hand.

SystemTimer's idle worker calls it once per turn of its loop, compiled on
one core and Python on the other; these call it directly, on both cores, on
a timer with no threads (``executor="inline"``, no reaper) and a fake clock,
one kind of answer at a time.
"""

from __future__ import annotations

import random
from typing import Any

import pytest


def _timer(timers: Any, clock: Any) -> Any:
    return timers.SystemTimer(name="keep", clock=clock, reaper=False, executor="inline")


def _turn(timers: Any, timer: Any, chunk: int = 256, idle_ns: int = 100_000) -> Any:
    return timers.core._keep_time(timer, timer._handover, chunk, idle_ns)


def test_nothing_pending_waits_until_woken(timers, fake_clock, no_thread_leak):
    timer = _timer(timers, fake_clock)
    try:
        assert _turn(timers, timer) is None
        assert timer._processed == 0
    finally:
        timer.close()


def test_waits_until_the_next_bucket_is_due(timers, fake_clock, no_thread_leak):
    timer = _timer(timers, fake_clock)
    try:
        timer.schedule(10, lambda: None)
        fake_clock.advance_ms(3.5)
        assert _turn(timers, timer) == 6_500_000  # ns, to the bucket at +10 ms
        assert _turn(timers, timer, chunk=0) == 6_500_000
    finally:
        timer.close()


def test_a_due_bucket_is_taken_and_counted(timers, fake_clock, no_thread_leak):
    timer = _timer(timers, fake_clock)
    try:
        first = timer.schedule(10, lambda: None)
        second = timer.schedule(10, lambda: None)
        later = timer.schedule(20, lambda: None)
        fake_clock.advance_ms(10)
        assert _turn(timers, timer) == [first, second]
        assert timer._processed == 1
        assert later.pending and timer.next_expiration_ms == timer.now_ms + 10
    finally:
        timer.close()


def test_a_due_bucket_is_left_while_another_thread_holds_the_handover(
    timers, fake_clock, no_thread_leak
):
    timer = _timer(timers, fake_clock)
    try:
        task = timer.schedule(10, lambda: None)
        fake_clock.advance_ms(10)
        with timer._handover:  # as the reaper does while it polls
            assert _turn(timers, timer) is False
        assert timer._processed == 0 and task.pending  # nothing taken
        assert _turn(timers, timer) == [task]
    finally:
        timer.close()


def _load_overflow(timer: Any, fake_clock: Any, n: int) -> None:
    """n tasks 1000-1500 ms ahead (a level-2 slot of Kafka's 1 ms x 20
    wheel), then the clock moved on until that slot may be cascaded early
    (the clock starts at 0: the slots are those of test_precascade.py)."""
    rnd = random.Random(5)
    for _ in range(n):
        timer.schedule(1_000 + rnd.randrange(500), lambda: None)
    fake_clock.advance_ms(1_000)
    timer.advance_clock(0)


def test_a_whole_chunk_of_early_cascading_asks_to_be_called_again(
    timers, fake_clock, no_thread_leak
):
    fake_clock.ns = 0
    timer = _timer(timers, fake_clock)
    looked: list[int] = []
    precascade = timer.precascade

    def counted(max_entries: int) -> int:
        looked.append(precascade(max_entries))
        return looked[-1]

    timer.precascade = counted
    try:
        _load_overflow(timer, fake_clock, 2_000)
        pending = len(timer)
        # Not idle long enough (the next bucket is nearer than idle_ns): no
        # cascading, only the wait.
        due_in = timer.next_expiration_ms * 1_000_000 - fake_clock.ns
        assert _turn(timers, timer, chunk=64, idle_ns=due_in + 1) == due_in
        assert looked == []
        turns = [_turn(timers, timer, chunk=64, idle_ns=0)]
        while turns[-1] == 0 and len(turns) < 1_000:
            turns.append(_turn(timers, timer, chunk=64, idle_ns=0))
        assert len(turns) > 2 and set(turns[:-1]) == {0}  # whole chunks ...
        assert looked[:-1] == [64] * (len(turns) - 1) and looked[-1] < 64
        assert isinstance(turns[-1], int) and turns[-1] > 0  # ... then a wait
        assert len(timer) == pending  # moved down a level, none lost or run
        timer._check()
    finally:
        timer.close()


@pytest.mark.parametrize("chunk", [0, 256])
def test_an_error_in_early_cascading_turns_it_off(
    timers, fake_clock, no_thread_leak, chunk
):
    timer = _timer(timers, fake_clock)
    calls = []

    def broken(max_entries: int = 256) -> int:
        calls.append(max_entries)
        raise MemoryError("simulated")

    timer.precascade = broken
    try:
        timer.schedule(10, lambda: None)
        if chunk:
            with pytest.raises(MemoryError, match="simulated"):
                _turn(timers, timer, chunk=chunk)
            assert calls == [chunk] and timer._cascade_early is False
        assert _turn(timers, timer, chunk=0) == 10_000_000
        assert calls == ([chunk] if chunk else [])
    finally:
        timer.close()
