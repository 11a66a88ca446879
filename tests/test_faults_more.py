"""Faults around SystemTimer beyond fork/exit (tests/test_timer_faults.py).

* a task that blocks: on the default executor (one worker thread) it delays
  every later task -- documented, and shown; a ThreadPoolExecutor lets the
  others run;
* a task that calls close() on its own timer, for each executor kind;
* a task that re-enters the timer (schedules and cancels on it);
* KeyboardInterrupt raised by a task on the thread that drives
  ``advance_clock`` (reaper=False, executor="inline"): it reaches the caller,
  and the rest of the due batch is neither lost nor run twice;
* interpreter exit with a pending purgatory and compat Timers.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest


@pytest.mark.slow
def test_fault_blocking_task_delays_others_on_default_executor_not_on_pool(
    timers, no_thread_leak
):
    # Default executor: one worker runs batches in order, so a task that
    # blocks holds up every task due after it (their deadlines still pass
    # on the reaper; they run late).  A pool runs them meanwhile.
    for kind in ("default", "pool"):
        pool = ThreadPoolExecutor(2) if kind == "pool" else None
        release = threading.Event()
        started = threading.Event()
        ran = threading.Event()

        def block() -> None:
            started.set()
            release.wait(10)

        with timers.SystemTimer(name=f"block-{kind}", executor=pool) as timer:
            timer.schedule(0, block)
            # Only once it blocks: a reaper that woke late on a loaded machine
            # would otherwise put both tasks in one batch, run in order.
            assert started.wait(10)
            timer.schedule(20, ran.set)
            if kind == "default":
                assert not ran.wait(0.3), "ran while the worker was blocked"
                release.set()
                assert ran.wait(10)
            else:
                assert ran.wait(10), "pool: the second task waited for the first"
                release.set()
        if pool is not None:
            pool.shutdown(wait=True)


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["default", "inline", "pool"])
def test_fault_task_closes_its_own_timer(timers, executor, no_thread_leak):
    pool = ThreadPoolExecutor(2) if executor == "pool" else None
    ex = {"default": None, "inline": "inline", "pool": pool}[executor]
    timer = timers.SystemTimer(name=f"self-close-{executor}", executor=ex)
    closed = threading.Event()
    later: list[int] = []
    timer.schedule(1, lambda: (timer.close(), closed.set()))
    timer.schedule(10_000, later.append, 1)
    assert closed.wait(10), "close() from inside a task hung"
    for thread in timer.threads:
        thread.join(10)
        assert not thread.is_alive()
    assert timer.closed and len(timer) == 0 and later == []
    with pytest.raises(RuntimeError, match="closed"):
        timer.schedule(1, print)
    timer._check()
    if pool is not None:
        pool.shutdown(wait=True)


@pytest.mark.slow
def test_fault_task_reenters_its_timer(timers, no_thread_leak):
    events: list[str] = []
    done = threading.Event()
    with timers.SystemTimer(name="reenter") as timer:
        victim = timer.schedule(200, events.append, "victim")

        def parent() -> None:
            events.append("parent")
            assert victim.cancel() is True  # cancel another pending task
            timer.schedule(5, child)  # add from inside run
            timer.schedule(0, events.append, "due-now")  # already due

        def child() -> None:
            events.append("child")
            done.set()

        timer.schedule(5, parent)
        assert done.wait(10)
        time.sleep(0.3)  # the victim's deadline passes: it must not run
        assert sorted(events) == ["child", "due-now", "parent"]
        assert len(timer) == 0
        timer._check()


def test_fault_keyboard_interrupt_reaches_advance_clock_caller(
    timers, fake_clock, no_thread_leak
):
    ran: list[str] = []

    def interrupt() -> None:
        ran.append("interrupt")
        raise KeyboardInterrupt

    timer = timers.SystemTimer(
        name="ctrl-c", reaper=False, executor="inline", clock=fake_clock
    )
    try:
        timer.schedule(5, ran.append, "a")
        timer.schedule(5, interrupt)
        timer.schedule(5, ran.append, "b")
        timer.schedule(50, ran.append, "later")
        fake_clock.advance_ms(5)
        with pytest.raises(KeyboardInterrupt):
            timer.advance_clock(0)
        assert "interrupt" in ran and ran.count("interrupt") == 1
        # What did not run yet is still owed: counted, and run on the next call.
        owed = {"a", "b"} - set(ran)
        assert len(timer) == len(owed) + 1
        assert timer.advance_clock(0) is True
        assert sorted(x for x in ran if x in "ab") == ["a", "b"]
        fake_clock.advance_ms(50)
        assert timer.advance_clock(0) is True
        assert sorted(ran) == ["a", "b", "interrupt", "later"]
        assert len(timer) == 0
        timer._check()
    finally:
        timer.close()


def test_fault_close_cancels_tasks_left_by_keyboard_interrupt(
    timers, fake_clock, no_thread_leak
):
    def interrupt() -> None:
        raise KeyboardInterrupt

    timer = timers.SystemTimer(
        name="ctrl-c-close", reaper=False, executor="inline", clock=fake_clock
    )
    first = timer.schedule(5, interrupt)
    rest = [timer.schedule(5, print, i) for i in range(3)]
    fake_clock.advance_ms(5)
    with pytest.raises(KeyboardInterrupt):
        timer.advance_clock(0)
    assert first.done
    timer.close()
    assert len(timer) == 0 and all(t.cancelled or t.done for t in rest)
    timer._check()


def test_fault_exit_with_pending_purgatory_and_compat_timers():
    script = textwrap.dedent(
        """
        from tickwheel import compat_threading
        from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

        class Op(DelayedOperation):
            def try_complete(self):
                return False

        p = DelayedOperationPurgatory("exit")          # owns a SystemTimer
        for i in range(100):
            p.try_complete_else_watch(Op(60_000 + i), [f"k{i % 7}"])
        p.try_complete_else_watch(Op(0), ["due"])      # expiring right now
        t = compat_threading.Timer(60, print, ["never"])
        t.daemon = True
        t.start()
        print("bye")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "bye\n", "")
