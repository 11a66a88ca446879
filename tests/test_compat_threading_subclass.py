"""Subclassing: one body run against ``threading.Timer`` and tickwheel's Timer.

What a user who subclasses ``threading.Timer`` relies on:
an overridden ``run()`` is what the Timer runs (the ``RepeatTimer`` idiom),
on a thread named ``name`` with ``daemon``; ``cancel()``, ``start()`` and
``__init__`` can be overridden and extended; setting ``finished`` does not
call a ``cancel()`` override; ``join()``/``is_alive()`` follow ``run()``;
exceptions from ``run()`` go to ``threading.excepthook``.  Each test waits
on events with a generous timeout and never measures time.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tickwheel import compat_threading
from tickwheel.compat_threading import Timer, get_timer, shutdown

WAIT = 10.0  # seconds; only reached when a test fails


@pytest.fixture
def shared_timer_closed(no_thread_leak: None) -> Iterator[None]:
    """Shut the shared timer down before no_thread_leak looks for threads."""
    yield
    shutdown()


@pytest.fixture(params=["stdlib", "tickwheel"])
def TimerClass(request: pytest.FixtureRequest, shared_timer_closed: None) -> Any:  # noqa: N802
    return threading.Timer if request.param == "stdlib" else Timer


def repeat_timer_class(base: Any) -> Any:
    class RepeatTimer(base):  # type: ignore[misc, valid-type]
        def run(self) -> None:
            while not self.finished.wait(self.interval):
                self.function(*self.args, **self.kwargs)

    return RepeatTimer


def test_subclass_repeat_timer_ticks_until_cancelled(TimerClass: Any) -> None:  # noqa: N803
    ticks: list[int] = []
    third = threading.Event()

    def tick() -> None:
        ticks.append(len(ticks))
        if len(ticks) == 3:
            third.set()

    t = repeat_timer_class(TimerClass)(0.001, tick)
    t.start()
    assert third.wait(WAIT), f"ticked {len(ticks)} time(s), not every interval"
    assert t.is_alive()
    t.cancel()
    t.join(WAIT)
    assert not t.is_alive() and t.finished.is_set()


def test_subclass_run_runs_on_a_thread_named_like_the_timer(TimerClass: Any) -> None:  # noqa: N803
    seen: list[tuple[str, bool, bool]] = []

    class Recording(TimerClass):  # type: ignore[misc, valid-type]
        def run(self) -> None:
            me = threading.current_thread()
            seen.append((me.name, me.daemon, me is threading.main_thread()))

    t = Recording(60.0, print)
    t.name = "recorder"
    t.daemon = True
    t.start()
    t.join(WAIT)
    assert seen == [("recorder", True, False)]
    assert not t.is_alive()


def test_subclass_run_exception_goes_to_excepthook(
    TimerClass: Any,  # noqa: N803
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hooked: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)

    class Failing(TimerClass):  # type: ignore[misc, valid-type]
        def run(self) -> None:
            raise KeyError("from run")

    t = Failing(0.0, print)
    t.start()
    t.join(WAIT)
    assert len(hooked) == 1
    assert hooked[0].exc_type is KeyError and hooked[0].thread is t
    assert not t.is_alive() and not t.finished.is_set()


def test_subclass_cancel_override_may_set_finished(TimerClass: Any) -> None:  # noqa: N803
    # A cancel() written the way threading's own is: finished.set().  Setting
    # finished must not call cancel() back (tickwheel recursed here).
    calls: list[str] = []

    class Counting(TimerClass):  # type: ignore[misc, valid-type]
        def cancel(self) -> None:
            calls.append("cancel")
            self.finished.set()

    fired: list[int] = []
    t = Counting(60.0, fired.append, [1])
    t.start()
    t.cancel()
    t.join(WAIT)
    assert calls == ["cancel"] and fired == []
    assert not t.is_alive() and t.finished.is_set()


def test_subclass_finished_set_does_not_call_cancel_override(TimerClass: Any) -> None:  # noqa: N803
    calls: list[str] = []

    class Logged(TimerClass):  # type: ignore[misc, valid-type]
        def cancel(self) -> None:
            calls.append("cancel")
            super().cancel()

    fired: list[int] = []
    t = Logged(60.0, fired.append, [1])
    t.start()
    t.finished.set()  # cancels, as in threading, but is not a cancel() call
    t.join(WAIT)
    assert calls == [] and fired == [] and not t.is_alive()


def test_subclass_init_and_start_overrides(TimerClass: Any) -> None:  # noqa: N803
    events: list[Any] = []

    class Tagged(TimerClass):  # type: ignore[misc, valid-type]
        def __init__(self, interval: float, tag: str, *, quiet: bool = True) -> None:
            super().__init__(interval, self.fire, args=[tag], kwargs={"n": 1})
            self.tag = tag
            self.daemon = quiet
            self.name = f"tagged-{tag}"

        def fire(self, tag: str, n: int) -> None:
            events.append(("fire", tag, n, self.tag))

        def start(self) -> None:
            events.append(("start", self.name, self.daemon))
            super().start()

    t = Tagged(0.0, "a")
    t.start()
    t.join(WAIT)
    assert events == [("start", "tagged-a", True), ("fire", "a", 1, "a")]
    assert t.finished.is_set() and not t.is_alive()


def test_subclass_join_from_own_run_raises(TimerClass: Any) -> None:  # noqa: N803
    errors: list[BaseException] = []

    class SelfJoining(TimerClass):  # type: ignore[misc, valid-type]
        def run(self) -> None:
            try:
                self.join()
            except RuntimeError as exc:
                errors.append(exc)

    t = SelfJoining(0.0, print)
    t.start()
    t.join(WAIT)
    assert len(errors) == 1 and "current thread" in str(errors[0])


def test_subclass_cancelled_before_start_still_runs_run(TimerClass: Any) -> None:  # noqa: N803
    # threading starts the thread anyway; run() finds `finished` already set.
    log: list[str] = []

    class Prologue(TimerClass):  # type: ignore[misc, valid-type]
        def run(self) -> None:
            log.append("run")
            while not self.finished.wait(self.interval):
                log.append("tick")

    t = Prologue(0.001, print)
    t.cancel()
    t.start()
    t.join(WAIT)
    assert log == ["run"] and not t.is_alive()


def test_subclass_run_calling_super_run(TimerClass: Any) -> None:  # noqa: N803
    log: list[str] = []

    class Wrapped(TimerClass):  # type: ignore[misc, valid-type]
        def run(self) -> None:
            log.append("before")
            super().run()
            log.append("after")

    t = Wrapped(0.0, log.append, ["function"])
    t.start()
    t.join(WAIT)
    assert log == ["before", "function", "after"]
    assert t.finished.is_set() and not t.is_alive()
    with pytest.raises(RuntimeError, match="once"):
        t.start()


def test_subclass_failing_excepthook_goes_to_sys_excepthook(
    TimerClass: Any,  # noqa: N803
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # threading: if threading.excepthook raises, print a line and pass the
    # hook's own exception to sys.excepthook.
    def bad_hook(args: Any) -> None:
        raise OSError("hook broke")

    seen: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", bad_hook)
    monkeypatch.setattr(sys, "excepthook", lambda *exc: seen.append(exc))

    def boom() -> None:
        raise ValueError("boom")

    t = TimerClass(0.0, boom)  # not a subclass: the shared executor's path
    t.start()
    t.join(WAIT)
    assert [(e[0], str(e[1])) for e in seen] == [(OSError, "hook broke")]
    assert "Exception in threading.excepthook:" in capsys.readouterr().err


# -- tickwheel only ----------------------------------------------------------------


def test_subclass_without_run_override_stays_on_the_wheel(
    shared_timer_closed: None,
) -> None:
    class Plain(Timer):
        def start(self) -> None:
            super().start()

    shutdown()  # whatever ran before: no shared timer now
    before = threading.active_count()
    timers = [Plain(60.0, print) for _ in range(50)]
    for t in timers:
        t.start()
    assert threading.active_count() - before == 2  # the shared timer's two
    assert len(get_timer()) == 50
    for t in timers:
        t.cancel()
    assert len(get_timer()) == 0


def test_subclass_run_override_costs_one_thread_and_no_wheel_slot(
    shared_timer_closed: None,
) -> None:
    shutdown()  # whatever ran before: no shared timer now
    t = repeat_timer_class(Timer)(60.0, print)
    before = set(threading.enumerate())
    t.start()
    new = [th for th in threading.enumerate() if th not in before]
    assert [th.name for th in new] == [t.name] and compat_threading._shared is None
    t.name = "renamed"
    assert new[0].name == "renamed"
    t.cancel()
    t.join(WAIT)
    assert not new[0].is_alive() and not t.is_alive()


@pytest.mark.slow
@pytest.mark.parametrize("module", ["threading", "tickwheel.compat_threading"])
def test_subclass_exit_waits_for_non_daemon_run_only(module: str) -> None:
    # threading joins a non-daemon thread at exit, whatever its run() does,
    # and drops daemon ones: the same holds for a run() override.
    import subprocess

    code = (
        f"from {module} import Timer\n"
        "class Countdown(Timer):\n"
        "    def run(self):\n"
        "        n = 3\n"
        "        while n and not self.finished.wait(self.interval):\n"
        "            n -= 1\n"
        "        print(self.function(n))\n"
        "t = Countdown(0.01, 'non-daemon done at {}'.format)\n"
        "t.start()\n"
        "d = Countdown(60.0, 'daemon done at {}'.format)\n"
        "d.daemon = True\n"
        "d.start()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["non-daemon done at 0"]


@pytest.mark.parametrize("module", ["threading", "tickwheel.compat_threading"])
def test_subclass_is_alive_override_is_not_called_by_join(module: str) -> None:
    # threading's join() reads the thread's state, not is_alive().
    # tickwheel's join() called is_alive() with its module lock held, so an
    # override that touched `finished` deadlocked: hence a subprocess.
    import subprocess

    code = (
        f"from {module} import Timer\n"
        "calls = []\n"
        "class Guarded(Timer):\n"
        "    def is_alive(self):\n"
        "        calls.append('is_alive')\n"
        "        return not self.finished.is_set() and super().is_alive()\n"
        "t = Guarded(60.0, print)\n"
        "t.start()\n"
        "t.cancel()\n"
        "t.join()\n"
        "n = len(calls)\n"
        "print(n, t.is_alive(), len(calls))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["0 False 1"]


def test_subclass_private_names_do_not_clobber_the_timer(TimerClass: Any) -> None:  # noqa: N803
    # Names threading.Timer does not use itself are the subclass's to take.
    fired: list[str] = []

    class Busy(TimerClass):  # type: ignore[misc, valid-type]
        def __init__(self, interval: float) -> None:
            super().__init__(interval, self._fire)
            self._state = "idle"
            self._timer = self._task = self._thread = self._runner = "mine"
            self._finished = self._finished_flag = self._daemon = "mine"

        def _fire(self) -> None:
            fired.append(self._state)

        def _cancel(self) -> None:
            raise AssertionError("the subclass's _cancel is not cancel()")

        def _alive(self) -> bool:
            raise AssertionError("the subclass's _alive is not is_alive()")

        def _finish_locked(self) -> None:
            raise AssertionError("the subclass's own helper")

    pending = Busy(60.0)
    pending.start()
    assert pending.is_alive()
    pending.finished.set()
    pending.join(WAIT)
    assert not pending.is_alive()
    due = Busy(0.0)
    due.start()
    due.join(WAIT)
    assert fired == ["idle"] and due.finished.is_set() and not due.is_alive()
    assert (due._state, due._timer, due._daemon) == ("idle", "mine", "mine")
