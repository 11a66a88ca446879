"""Contract tests: one body run against ``threading.Timer`` and tickwheel's.

Each test in :class:`TestTimerContract` runs once per implementation (the
uvloop ``tests/test_base.py`` pattern).  The contract avoids waiting for
intervals: it uses intervals <= 0 (due at once) or long ones that are
cancelled, plus ``join()``.  A few real-time checks are marked ``slow``;
tickwheel-only tests drive a SystemTimer by hand on a fake clock.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from tickwheel import SystemTimer
from tickwheel.compat_threading import Timer, get_timer, shutdown


@pytest.fixture
def shared_timer_closed(no_thread_leak: None) -> Iterator[None]:
    """Shut the shared timer down before no_thread_leak looks for threads."""
    yield
    shutdown()


@pytest.fixture(params=["stdlib", "tickwheel"])
def TimerClass(request: pytest.FixtureRequest, shared_timer_closed: None) -> Any:  # noqa: N802
    return threading.Timer if request.param == "stdlib" else Timer


class Calls:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.threads: list[threading.Thread] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))
        self.threads.append(threading.current_thread())


class TestTimerContract:
    def test_timer_fires_with_args_and_kwargs(self, TimerClass: Any) -> None:  # noqa: N803
        calls = Calls()
        t = TimerClass(0.0, calls, args=[1, 2], kwargs={"k": 3})
        assert not t.is_alive()
        t.start()
        t.join(5)
        assert calls.calls == [((1, 2), {"k": 3})]
        assert t.finished.is_set() and not t.is_alive()
        assert threading.current_thread() not in calls.threads

    def test_timer_attributes(self, TimerClass: Any) -> None:  # noqa: N803
        t = TimerClass(1.5, print)
        assert t.interval == 1.5 and t.function is print
        assert t.args == [] and t.kwargs == {}
        assert isinstance(t.name, str) and t.name
        t.name = "renamed"
        assert t.name == "renamed"
        assert t.daemon is threading.current_thread().daemon
        t.daemon = True
        assert t.daemon is True
        assert isinstance(t.finished, threading.Event) and not t.finished.is_set()

    def test_timer_cancel_before_start(self, TimerClass: Any) -> None:  # noqa: N803
        calls = Calls()
        t = TimerClass(0.0, calls)
        t.cancel()
        t.start()
        t.join(5)
        assert calls.calls == [] and t.finished.is_set() and not t.is_alive()

    def test_timer_cancel_pending(self, TimerClass: Any) -> None:  # noqa: N803
        calls = Calls()
        t = TimerClass(60.0, calls)
        t.start()
        assert t.is_alive()
        t.cancel()
        t.join(5)
        assert not t.is_alive() and t.finished.is_set() and calls.calls == []

    def test_timer_setting_finished_cancels(self, TimerClass: Any) -> None:  # noqa: N803
        calls = Calls()
        t = TimerClass(60.0, calls)
        t.start()
        t.finished.set()
        t.join(5)
        assert not t.is_alive() and calls.calls == []

    def test_timer_cancel_after_fire_has_no_effect(self, TimerClass: Any) -> None:  # noqa: N803
        calls = Calls()
        t = TimerClass(0.0, calls)
        t.start()
        t.join(5)
        t.cancel()
        t.cancel()
        assert calls.calls == [((), {})] and t.finished.is_set() and not t.is_alive()

    def test_timer_negative_interval_runs_at_once(self, TimerClass: Any) -> None:  # noqa: N803
        calls = Calls()
        t = TimerClass(-10, calls)
        t.start()
        t.join(5)
        assert calls.calls == [((), {})]

    def test_timer_start_twice_raises(self, TimerClass: Any) -> None:  # noqa: N803
        t = TimerClass(60.0, print)
        t.start()
        with pytest.raises(RuntimeError, match="once"):
            t.start()
        t.cancel()
        t.join(5)

    def test_timer_join_before_start_raises(self, TimerClass: Any) -> None:  # noqa: N803
        with pytest.raises(RuntimeError, match="before it is started"):
            TimerClass(1.0, print).join()

    def test_timer_join_from_own_callback_raises(self, TimerClass: Any) -> None:  # noqa: N803
        errors: list[BaseException] = []
        holder: list[Any] = []

        def cb() -> None:
            try:
                holder[0].join()
            except RuntimeError as exc:
                errors.append(exc)

        t = TimerClass(0.0, cb)
        holder.append(t)
        t.start()
        t.join(5)
        assert len(errors) == 1 and "current thread" in str(errors[0])

    def test_timer_join_timeout_returns_while_pending(self, TimerClass: Any) -> None:  # noqa: N803
        t = TimerClass(60.0, print)
        t.start()
        t.join(0.01)
        assert t.is_alive()
        t.cancel()
        t.join(5)
        assert not t.is_alive()

    def test_timer_exception_goes_to_excepthook_and_timers_continue(
        self,
        TimerClass: Any,
        monkeypatch: pytest.MonkeyPatch,  # noqa: N803
    ) -> None:
        hooked: list[Any] = []
        monkeypatch.setattr(threading, "excepthook", lambda args: hooked.append(args))

        def boom() -> None:
            raise ValueError("boom")

        bad = TimerClass(0.0, boom)
        bad.start()
        bad.join(5)
        assert len(hooked) == 1
        assert hooked[0].exc_type is ValueError and str(hooked[0].exc_value) == "boom"
        assert hooked[0].thread.name == bad.name
        # threading.Timer.run() skips finished.set() when the function raises.
        assert not bad.finished.is_set() and not bad.is_alive()
        calls = Calls()
        good = TimerClass(0.0, calls)
        good.start()
        good.join(5)
        assert calls.calls == [((), {})]

    def test_timer_many_pending_then_cancelled(self, TimerClass: Any) -> None:  # noqa: N803
        timers = [TimerClass(60.0, print) for _ in range(20)]
        for t in timers:
            t.start()
        assert all(t.is_alive() for t in timers)
        for t in timers:
            t.cancel()
        for t in timers:
            t.join(5)
        assert not any(t.is_alive() for t in timers)

    @pytest.mark.slow
    def test_timer_never_fires_early(self, TimerClass: Any) -> None:  # noqa: N803
        fired: list[float] = []
        start = time.monotonic()
        t = TimerClass(0.05, lambda: fired.append(time.monotonic()))
        t.start()
        t.join(5)
        assert fired and fired[0] - start >= 0.05


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_timer_base_exception_goes_to_excepthook(
    TimerClass: Any,  # noqa: N803
    monkeypatch: pytest.MonkeyPatch,
    exc_type: type[BaseException],
) -> None:
    # threading hands every exception that ends the thread to excepthook.
    hooked: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)

    def leave() -> None:
        raise exc_type(3)

    t = TimerClass(0.0, leave)
    t.start()
    t.join(5)
    assert [(h.exc_type, h.thread) for h in hooked] == [(exc_type, t)]
    assert not t.is_alive() and not t.finished.is_set()
    fired = threading.Event()
    after = TimerClass(0.0, fired.set)
    after.start()
    assert fired.wait(5)
    after.join(5)


def test_timer_sys_exit_in_function_is_quiet(
    TimerClass: Any,  # noqa: N803
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # threading's default excepthook ignores SystemExit: nothing is printed.
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    t = TimerClass(0.0, sys.exit, [3])
    t.start()
    t.join(5)
    assert not t.is_alive()
    assert capsys.readouterr().err == "" and caplog.records == []


# -- tickwheel only ----------------------------------------------------------------


class FakeNs:
    def __init__(self) -> None:
        self.ns = 10**12

    def __call__(self) -> int:
        return self.ns


@pytest.fixture
def manual_timer(no_thread_leak: None) -> Iterator[tuple[SystemTimer, FakeNs]]:
    """A reaper-less SystemTimer on a fake clock, running tasks inline."""
    clock = FakeNs()
    timer = SystemTimer("manual", reaper=False, executor="inline", clock=clock)
    yield timer, clock
    timer.close()


def test_timer_fake_clock_fires_at_interval_not_before(
    manual_timer: tuple[SystemTimer, FakeNs],
) -> None:
    timer, clock = manual_timer
    calls = Calls()
    t = Timer(0.5, calls, timer=timer)
    t.start()
    clock.ns += 499_000_000
    # A bucket falls due and cascades (advance_clock says True, as Kafka's),
    # but nothing runs before the interval.
    timer.advance_clock(0)
    assert calls.calls == [] and t.is_alive()
    clock.ns += 1_000_000
    assert timer.advance_clock(0) is True
    assert calls.calls == [((), {})] and not t.is_alive() and t.finished.is_set()


def test_timer_fake_clock_cancel_frees_the_wheel_slot(
    manual_timer: tuple[SystemTimer, FakeNs],
) -> None:
    timer, clock = manual_timer
    timers = [Timer(i / 1000, print, timer=timer) for i in range(1, 101)]
    for t in timers:
        t.start()
    assert len(timer) == 100
    for t in timers[::2]:
        t.cancel()
    assert len(timer) == 50
    timer._check()
    calls = Calls()
    for t in timers[1::2]:
        t.function = calls
    clock.ns += 200_000_000
    timer.advance_clock(0)
    assert len(calls.calls) == 50 and len(timer) == 0


def test_timer_many_started_cost_two_threads(shared_timer_closed: None) -> None:
    before = threading.active_count()
    timers = [Timer(60.0, print) for _ in range(2000)]
    for t in timers:
        t.start()
    assert threading.active_count() - before == 2
    names = sorted(th.name for th in get_timer().threads)
    assert names == ["tickwheel-threading-executor", "tickwheel-threading-reaper"]
    assert all(th.daemon for th in get_timer().threads)
    for t in timers:
        t.cancel()
    assert len(get_timer()) == 0


def test_timer_callbacks_run_on_shared_executor_deviation(
    shared_timer_closed: None,
) -> None:
    # threading.Timer runs each callback on its own thread; here they share one.
    calls = Calls()
    timers = [Timer(0.0, calls) for _ in range(3)]
    for t in timers:
        t.start()
    for t in timers:
        t.join(5)
    assert {th.name for th in calls.threads} == {"tickwheel-threading-executor"}
    assert not any(isinstance(t, threading.Thread) for t in timers)


def test_timer_shutdown_cancels_pending_and_restarts_lazily(
    shared_timer_closed: None,
) -> None:
    calls = Calls()
    pending = Timer(60.0, calls)
    pending.daemon = True
    pending.start()
    first = get_timer()
    shutdown()
    pending.join(5)
    assert not pending.is_alive() and pending.finished.is_set() and calls.calls == []
    assert first.closed and not any(th.is_alive() for th in first.threads)
    shutdown()  # idempotent
    again = Timer(0.0, calls)
    again.start()
    again.join(5)
    assert calls.calls == [((), {})] and get_timer() is not first


def test_timer_daemon_cannot_change_after_start(shared_timer_closed: None) -> None:
    t = Timer(60.0, print)
    t.start()
    with pytest.raises(RuntimeError, match="daemon"):
        t.daemon = True
    t.cancel()


def test_timer_bad_arguments_raise_at_construction() -> None:
    with pytest.raises(TypeError, match="interval"):
        Timer("soon", print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="interval"):
        Timer(None, print)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="interval must not be NaN"):
        Timer(float("nan"), print)
    with pytest.raises(TypeError, match="function must be callable"):
        Timer(1.0, "print")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timer must be a SystemTimer"):
        Timer(1.0, print, timer=object())  # type: ignore[arg-type]


def test_timer_on_closed_timer_raises_and_is_finished(
    manual_timer: tuple[SystemTimer, FakeNs],
) -> None:
    timer, _ = manual_timer
    timer.close()
    t = Timer(1.0, print, timer=timer)
    with pytest.raises(RuntimeError, match="closed"):
        t.start()
    assert not t.is_alive() and t.finished.is_set()


def test_timer_huge_interval_is_clamped(shared_timer_closed: None) -> None:
    t = Timer(float("inf"), print)
    t.start()
    assert t.is_alive()
    t.cancel()
    assert not t.is_alive()


@pytest.mark.slow
@pytest.mark.parametrize("module", ["threading", "tickwheel.compat_threading"])
def test_timer_exit_waits_for_non_daemon_only(module: str) -> None:
    # threading joins non-daemon threads at exit; tickwheel awaits non-daemon
    # Timers from atexit.  Daemon ones are dropped by both.
    import subprocess
    import sys

    code = (
        f"from {module} import Timer\n"
        "t = Timer(0.05, print, ['non-daemon fired'])\n"
        "t.start()\n"
        "d = Timer(5.0, print, ['daemon fired'])\n"
        "d.daemon = True\n"
        "d.start()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["non-daemon fired"]


@pytest.mark.slow
def test_timer_fork_child_starts_fresh(shared_timer_closed: None) -> None:
    import os

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    parent_pending = Timer(60.0, print)
    parent_pending.start()
    r, w = os.pipe()
    # The timer's threads are running: 3.12+ warns that fork() may deadlock
    # the child (3.12-3.14 print it, 3.15 raises it like any warning).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pid = os.fork()
    if pid == 0:  # child: the parent's Timer does not run; a new one does
        try:
            done = threading.Event()
            t = Timer(0.0, done.set)
            t.start()
            ok = done.wait(5) and not parent_pending.is_alive()
            shutdown()
            os.write(w, b"ok" if ok else b"bad")
        finally:
            os._exit(0)
    os.close(w)
    assert os.read(r, 2) == b"ok"
    os.close(r)
    os.waitpid(pid, 0)
    assert parent_pending.is_alive()
    for warning in caught:  # nothing but CPython's warning about the threads
        assert warning.category is DeprecationWarning
        assert "is multi-threaded, use of fork()" in str(warning.message)
    if sys.version_info >= (3, 15):
        assert len(caught) == 1
    parent_pending.cancel()
