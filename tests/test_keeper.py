"""The idle time keeper's turn (the core's ``_keep_time``), driven by hand.

SystemTimer's idle worker calls it once per turn of its loop, compiled on
one core and Python on the other; these call it directly, on both cores, on
a timer with no threads (``executor="inline"``, no reaper) and a fake clock,
one kind of answer at a time (its chunks of early cascading, and their
errors: tests/test_precascade.py).
"""

from __future__ import annotations

from typing import Any


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
