"""Bad input at every public entry point: a clear exception, nothing changed.

One table per family of entry points.  Each row is an argument that must be
refused; the test checks the exception type, that the message names the
argument and shows the value (``name ... got <repr>``), and that the timer
(or purgatory, or drop-in) is exactly as before: ``len()``, clock, next
expiration, every pending task's state, and ``_check()``.

Both cores run every row (the ``timers`` fixture).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import re
import sched as stdlib_sched
import threading
from collections.abc import Callable
from typing import Any

import pytest
from twins import twin_package

import tickwheel
from tickwheel import (
    MAX_DELAY_MS,
    USE_EXTENSIONS,
    compat_asyncio,
    compat_sched,
    compat_threading,
)
from tickwheel import timer as timer_mod

NAN, INF = math.nan, math.inf
WRONG_TYPES = [None, "5", b"5", [], (1,), 1 + 2j, object()]
BOOLS = [True, False]
NON_FINITE = [NAN, INF, -INF]
HUGE = [2**63, 2**64, 2**100]
HUGE_NEG = [-(2**63) - 1, -(2**100)]

# The clock range of a manual timer, in ms (±2**62 ns).
CLOCK_END_MS = 2**62 // 1_000_000


def _repr(value: Any) -> str:
    """repr() without memory addresses: test ids must be the same in every
    process (pytest-xdist workers compare their collections)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _ids(rows: list[tuple[Any, ...]]) -> list[str]:
    return [f"{r[0]}={_repr(r[1])}"[:60] for r in rows]


def _expect(
    exc: type[BaseException] | tuple[type[BaseException], ...],
    fn: Callable[[], Any],
    name: str | None,
    value: Any,
) -> BaseException:
    with pytest.raises(exc) as info:
        fn()
    message = str(info.value)
    if name is not None:
        assert name in message, f"{message!r} does not name {name!r}"
        assert repr(value) in message, f"{message!r} does not show {value!r}"
    return info.value


# -- the timer under test --------------------------------------------------------------
def _populate(timer: Any) -> list[Any]:
    """Give a timer pending work at several levels, plus one spent task."""
    tasks = [timer.schedule(d, lambda: None) for d in (1, 7, 500, 90_000, 10**9)]
    spent = timer.schedule(3, lambda: None)
    spent.cancel()
    return tasks + [spent]


def _snapshot(timer: Any, tasks: list[Any]) -> tuple[Any, ...]:
    timer._check()
    return (
        len(timer),
        timer.now_ns,
        timer.next_expiration_ms,
        timer.closed,
        [(t.state, t.expiration_ms, t.delay_ms) for t in tasks],
    )


@pytest.fixture
def mock(timers):
    timer = timers.MockTimer(start_ms=1_000)
    tasks = _populate(timer)
    before = _snapshot(timer, tasks)
    yield timer
    assert _snapshot(timer, tasks) == before, "a refused call changed the timer"


@pytest.fixture
def system(timers, fake_clock, no_thread_leak):
    timer = timers.SystemTimer(
        name="bad-input", reaper=False, executor="inline", clock=fake_clock
    )
    tasks = _populate(timer)
    before = _snapshot(timer, tasks)
    yield timer
    assert _snapshot(timer, tasks) == before, "a refused call changed the timer"
    timer.close()


# -- delays: TimerTask(), schedule(), delay_ms setter ----------------------------------
DELAY_ROWS = (
    [("delay_ms", v, TypeError) for v in WRONG_TYPES + BOOLS]
    + [("delay_ms", v, ValueError) for v in NON_FINITE]
    + [("delay_ms", v, OverflowError) for v in HUGE + HUGE_NEG]
    + [
        ("delay_ms", MAX_DELAY_MS + 1, OverflowError),
        ("delay_ms", 1e300, OverflowError),
    ]
)


@pytest.mark.parametrize(("name", "value", "exc"), DELAY_ROWS, ids=_ids(DELAY_ROWS))
def test_bad_input_delay_everywhere(timers, mock, system, name, value, exc):
    _expect(exc, lambda: timers.TimerTask(value, print), name, value)
    _expect(exc, lambda: mock.schedule(value, print), name, value)
    _expect(exc, lambda: system.schedule(value, print), name, value)
    task = mock.schedule(50, print)
    _expect(exc, lambda: setattr(task, "delay_ms", value), name, value)
    assert task.delay_ms == 50 and task.pending
    task.cancel()
    # A subclass task re-added with a bad delay set via the slot is still refused.
    _expect(exc, lambda: purgatory_op(timers)(value), name, value)


def purgatory_op(timers: Any) -> type:
    base = timers.purgatory.DelayedOperation

    class Op(base):  # type: ignore[misc, valid-type]
        def try_complete(self) -> bool:
            return False

    return Op


# -- callables and tasks ---------------------------------------------------------------
@pytest.mark.parametrize("fn", [None, 5, "print", [print]], ids=_repr)
def test_bad_input_fn_not_callable(timers, mock, system, fn):
    for timer in (mock, system):
        _expect(TypeError, lambda: timer.schedule(5, fn), "fn", fn)
    if fn is not None:  # TimerTask(delay) with fn=None is a subclass-style task
        _expect(TypeError, lambda: timers.TimerTask(5, fn), "fn", fn)


@pytest.mark.parametrize("task", [None, 5, print, object(), "task"], ids=_repr)
def test_bad_input_add_non_task(mock, system, task):
    for timer in (mock, system):
        _expect(TypeError, lambda: timer.add(task), "task", task)


def test_bad_input_foreign_and_spent_tasks(timers, mock, system):
    other = timers.MockTimer()
    foreign = other.schedule(5_000, print)
    for timer in (mock, system):
        with pytest.raises(ValueError, match="pending in another timer"):
            timer.add(foreign)
    assert foreign.pending and len(other) == 1
    other._check()
    spent = mock.schedule(5, print)
    spent.cancel()
    for timer in (mock, system):
        with pytest.raises(RuntimeError, match="released its callable"):
            timer.add(spent)
    # A task of the other core is not a TimerTask of this one (only when both
    # cores exist: under TICKWHEEL_NO_EXTENSIONS=1 MockTimer is the twin too).
    if USE_EXTENSIONS:
        other_core = (
            tickwheel.MockTimer
            if timers.package is not tickwheel
            else twin_package().MockTimer
        )
        alien = other_core().schedule(5_000, print)
        for timer in (mock, system):
            _expect(TypeError, lambda: timer.add(alien), "task", alien)
    # kwargs need a callable
    with pytest.raises(TypeError, match="keyword arguments need fn"):
        timers.TimerTask(5, None, x=1)


# -- MockTimer.advance_clock / advance_to ------------------------------------------
ADVANCE_ROWS = (
    [("ms", v, TypeError) for v in WRONG_TYPES + BOOLS]
    + [("ms", v, ValueError) for v in NON_FINITE + [-1, -0.5] + HUGE_NEG]
    + [("ms", v, OverflowError) for v in HUGE]
)


@pytest.mark.parametrize(("name", "value", "exc"), ADVANCE_ROWS, ids=_ids(ADVANCE_ROWS))
def test_bad_input_mock_advance_clock(mock, name, value, exc):
    _expect(exc, lambda: mock.advance_clock(value), name, value)


PRECASCADE_ROWS = (
    [("max_entries", v, TypeError) for v in WRONG_TYPES + BOOLS + NON_FINITE + [5.0]]
    + [("max_entries", v, ValueError) for v in [0, -1] + HUGE_NEG]
    + [("max_entries", v, OverflowError) for v in HUGE]
)


@pytest.mark.parametrize(
    ("name", "value", "exc"), PRECASCADE_ROWS, ids=_ids(PRECASCADE_ROWS)
)
def test_bad_input_precascade(mock, system, name, value, exc):
    for timer in (mock, system):
        _expect(exc, lambda: timer.precascade(value), name, value)


ADVANCE_TO_ROWS = (
    [("time_ms", v, TypeError) for v in WRONG_TYPES + BOOLS + NON_FINITE + [5.0]]
    + [("time_ms", v, ValueError) for v in [-1, 999]]
    + [("time_ms", v, (ValueError, OverflowError)) for v in HUGE_NEG]
    + [("time_ms", v, OverflowError) for v in HUGE + [CLOCK_END_MS + 1]]
)


@pytest.mark.parametrize(
    ("name", "value", "exc"), ADVANCE_TO_ROWS, ids=_ids(ADVANCE_TO_ROWS)
)
def test_bad_input_mock_advance_to(mock, name, value, exc):
    _expect(exc, lambda: mock.advance_to(value), name, value)


def test_bad_input_advance_past_clock_end_runs_nothing(timers):
    """A step that would carry the clock past its range is refused up front.

    Before the fix the due tasks ran first and the clock update raised after,
    so the caller saw an error *and* a changed timer.
    """
    timer = timers.MockTimer(start_ms=CLOCK_END_MS - 10)
    ran: list[int] = []
    timer.schedule(5, ran.append, 1)
    with pytest.raises(OverflowError, match="ms"):
        timer.advance_clock(MAX_DELAY_MS)
    with pytest.raises(OverflowError, match="time_ms"):
        timer.advance_to(CLOCK_END_MS + 1)
    assert ran == [] and len(timer) == 1 and timer.now_ms == CLOCK_END_MS - 10
    timer._check()
    assert timer.advance_to(CLOCK_END_MS) and ran == [1]


def test_bad_input_deadline_past_clock_end(timers):
    """Deadlines up to MAX_DELAY_MS past the clock's end work; later ones are refused.

    Before the fix the pure-Python twin linked such a task and then failed on
    the bucket's expiration (a corrupt wheel: "non-empty bucket is not
    queued"), while the compiled core accepted it.  A tick that rounds the
    deadline past what nanoseconds in an int64 can hold is refused up front,
    with the task left where it was.
    """
    timer = timers.MockTimer(start_ms=CLOCK_END_MS - 100)
    far = timer.schedule(MAX_DELAY_MS, print)
    near = timer.schedule(10, print)
    near.delay_ms = MAX_DELAY_MS - 1
    timer.add(near)
    assert far.pending and near.pending and len(timer) == 2
    timer._check()
    assert timer.advance_to(CLOCK_END_MS) is False
    timer._check()

    coarse = timers.MockTimer(start_ms=CLOCK_END_MS - 100, tick_ms=2**20)
    task = coarse.schedule(10, print)
    before = _snapshot(coarse, [task])
    _expect(
        OverflowError,
        lambda: coarse.schedule(MAX_DELAY_MS, print),
        "delay_ms",
        MAX_DELAY_MS,
    )
    task.delay_ms = MAX_DELAY_MS
    _expect(OverflowError, lambda: coarse.add(task), "delay_ms", MAX_DELAY_MS)
    task.delay_ms = 10
    assert _snapshot(coarse, [task]) == before


def test_bad_input_wheel_that_cannot_reach_max_delay_is_refused(timers):
    """tick_ms x wheel_size whose overflow wheels cannot cover MAX_DELAY_MS.

    Before the fix the timer was built, and adding a far task failed while
    creating an overflow wheel: a re-added task was left "pending" but in no
    bucket and not counted -- lost.
    """
    with pytest.raises(ValueError, match=r"tick_ms=524288.*wheel_size=4194304"):
        timers.MockTimer(tick_ms=2**19, wheel_size=2**22)
    timer = timers.MockTimer(tick_ms=2**19, wheel_size=2**21)  # reaches: accepted
    task = timer.schedule(5, print)
    task.delay_ms = MAX_DELAY_MS - 2**20  # a tick of 2**19 ms rounds up
    timer.add(task)
    assert task.pending and len(timer) == 1
    timer._check()


# -- constructors ----------------------------------------------------------------------
INT_ARG_ROWS = (
    [
        (n, v, TypeError)
        for n in ("tick_ms", "wheel_size", "start_ms")
        for v in [*WRONG_TYPES[1:], *BOOLS, *NON_FINITE, 2.0]
    ]
    + [("tick_ms", v, ValueError) for v in (0, -1, *HUGE_NEG)]
    + [("wheel_size", v, ValueError) for v in (0, 1, -1, *HUGE_NEG)]
    + [
        (n, v, OverflowError)
        for n in ("tick_ms", "wheel_size", "start_ms")
        for v in HUGE
    ]
    + [("start_ms", v, OverflowError) for v in HUGE_NEG]
    + [("on_error", v, TypeError) for v in (5, "log")]
)


@pytest.mark.parametrize(("name", "value", "exc"), INT_ARG_ROWS, ids=_ids(INT_ARG_ROWS))
def test_bad_input_mock_constructor(timers, name, value, exc):
    _expect(exc, lambda: timers.MockTimer(**{name: value}), name, value)


SYSTEM_ROWS = [
    *INT_ARG_ROWS,
    ("name", 5, TypeError),
    ("name", "", TypeError),
    ("name", None, TypeError),
    ("executor", "thread", TypeError),
    ("executor", 5, TypeError),
    ("executor", concurrent.futures.ThreadPoolExecutor, TypeError),
    ("clock", 5, TypeError),
    ("clock", "monotonic", TypeError),
    ("cascade_early", 1, TypeError),
    ("cascade_early", None, TypeError),
]


@pytest.mark.parametrize(("name", "value", "exc"), SYSTEM_ROWS, ids=_ids(SYSTEM_ROWS))
def test_bad_input_system_constructor_starts_nothing(
    timers, no_thread_leak, name, value, exc
):
    _expect(exc, lambda: timers.SystemTimer(**{name: value}), name, value)


SYSTEM_ADVANCE_ROWS = (
    [("timeout_ms", v, TypeError) for v in WRONG_TYPES + BOOLS]
    + [("timeout_ms", v, ValueError) for v in NON_FINITE + [-1]]
    + [("timeout_ms", v, OverflowError) for v in HUGE]
)


@pytest.mark.parametrize(
    ("name", "value", "exc"), SYSTEM_ADVANCE_ROWS, ids=_ids(SYSTEM_ADVANCE_ROWS)
)
def test_bad_input_system_advance_clock(system, name, value, exc):
    _expect(exc, lambda: system.advance_clock(value), name, value)


def test_bad_input_closed_timers(timers, fake_clock, no_thread_leak):
    for timer in (
        timers.MockTimer(),
        timers.SystemTimer(name="closed", clock=fake_clock, reaper=False),
    ):
        task = timers.TimerTask(5, print)
        timer.close()
        with pytest.raises(RuntimeError, match="closed"):
            timer.schedule(5, print)
        with pytest.raises(RuntimeError, match="closed"):
            timer.add(task)
        assert task.state == "idle" and len(timer) == 0
        assert timer.advance_clock(0) is False  # nothing to do, no error
        timer.close()  # idempotent
        timer._check()


# -- purgatory -------------------------------------------------------------------------
@pytest.fixture
def purgatory(timers):
    timer = timers.MockTimer()
    p = timers.purgatory.DelayedOperationPurgatory("bad", timer)
    Op = purgatory_op(timers)
    watched = Op(1_000)
    p.try_complete_else_watch(watched, ["k0", "k1"])
    before = (p.watched, p.delayed, sorted(map(str, p.keys())), timer.now_ns)
    yield p, Op
    assert (p.watched, p.delayed, sorted(map(str, p.keys())), timer.now_ns) == before
    p._check()
    timer._check()


PURGATORY_KEY_ROWS = [
    ("keys", "abc", TypeError),
    ("keys", b"abc", TypeError),
    ("keys", 5, TypeError),
    ("keys", None, TypeError),
    ("keys", [], ValueError),
    ("keys", (), ValueError),
    ("key", [["x"]], TypeError),
    ("key", ["ok", {}], TypeError),
]


@pytest.mark.parametrize(
    ("name", "value", "exc"), PURGATORY_KEY_ROWS, ids=_ids(PURGATORY_KEY_ROWS)
)
def test_bad_input_purgatory_keys(purgatory, name, value, exc):
    p, Op = purgatory
    op = Op(100)
    shown = value if name == "keys" else next(k for k in value if _unhashable(k))
    _expect(exc, lambda: p.try_complete_else_watch(op, value), name, shown)
    assert not op.completed and op.state == "idle"
    assert p.try_complete_else_watch(op, ["fresh"]) is False  # still submittable
    op.cancel()
    p.cancel_for_key("fresh")


def _unhashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return True
    return False


@pytest.mark.parametrize("key", [[], {}, {1}, ["k0"]], ids=_repr)
def test_bad_input_purgatory_unhashable_key(purgatory, key):
    p, _ = purgatory
    _expect(TypeError, lambda: p.check_and_complete(key), "key", key)
    _expect(TypeError, lambda: p.cancel_for_key(key), "key", key)


@pytest.mark.parametrize("op", [None, 5, object(), print], ids=_repr)
def test_bad_input_purgatory_not_an_operation(purgatory, op):
    p, _ = purgatory
    _expect(TypeError, lambda: p.try_complete_else_watch(op, ["k"]), "operation", op)


@pytest.mark.parametrize(
    ("value", "exc"),
    [
        (NAN, ValueError),
        (-1, ValueError),
        ("5", TypeError),
        (True, TypeError),
        (2**100, OverflowError),
    ],
    ids=_repr,
)
def test_bad_input_purgatory_advance_clock(purgatory, value, exc):
    p, _ = purgatory
    _expect(exc, lambda: p.advance_clock(value), "ms", value)


@pytest.mark.parametrize("lock", [5, "lock", object(), threading.Event()], ids=_repr)
def test_bad_input_delayed_operation_lock(timers, lock):
    Op = purgatory_op(timers)
    _expect(TypeError, lambda: Op(10, lock), "lock", lock)


def test_bad_input_purgatory_after_shutdown_and_resubmit(timers):
    timer = timers.MockTimer()
    p = timers.purgatory.DelayedOperationPurgatory("shut", timer)
    Op = purgatory_op(timers)
    op = Op(100)
    p.try_complete_else_watch(op, ["k"])
    with pytest.raises(ValueError, match="already submitted"):
        p.try_complete_else_watch(op, ["k2"])
    p.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        p.try_complete_else_watch(Op(100), ["k"])
    assert p.check_and_complete("k") == 0 and p.cancel_for_key("k") == []
    assert len(timer) == 0
    timer._check()


# -- drop-ins --------------------------------------------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def time(self) -> float:
        return self.now

    def sleep(self, dt: float) -> None:
        self.now += dt


@pytest.mark.parametrize(
    ("kwargs", "name", "value", "exc"),
    [
        ({"timefunc": 5}, "timefunc", 5, TypeError),
        ({"delayfunc": "sleep"}, "delayfunc", "sleep", TypeError),
        ({"ticks_per_unit": 0}, "ticks_per_unit", 0, ValueError),
        ({"ticks_per_unit": NAN}, "ticks_per_unit", NAN, ValueError),
        ({"ticks_per_unit": INF}, "ticks_per_unit", INF, ValueError),
        ({"ticks_per_unit": True}, "ticks_per_unit", True, ValueError),
        ({"timefunc": lambda: "now"}, "timefunc()", "now", TypeError),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_bad_input_sched_constructor(kwargs, name, value, exc):
    clock = _Clock()
    args = {"timefunc": clock.time, "delayfunc": clock.sleep, **kwargs}
    _expect(exc, lambda: compat_sched.scheduler(**args), name, value)


def test_bad_input_sched_calls_leave_queue_unchanged():
    clock = _Clock()
    s = compat_sched.scheduler(clock.time, clock.sleep)
    kept = [s.enter(d, 1, print) for d in (1, 5, 500)]
    before = list(s.queue)
    with pytest.raises(ValueError, match="NaN"):
        s.enterabs(NAN, 1, print)
    with pytest.raises(TypeError):
        s.enterabs("later", 1, print)
    with pytest.raises(TypeError):
        s.enter(None, 1, print)
    # Foreign / stale events: ValueError, as the stdlib raises.
    stdlib_event = stdlib_sched.scheduler(clock.time, clock.sleep).enter(2, 1, print)
    for event in (stdlib_event, kept[0]._replace(priority=9)):
        with pytest.raises(ValueError):
            s.cancel(event)
    with pytest.raises((TypeError, ValueError)):
        s.cancel("event")  # type: ignore[arg-type]
    assert list(s.queue) == before
    s._check()


@pytest.mark.parametrize(
    ("interval", "exc"),
    [("soon", TypeError), (None, TypeError), ([], TypeError), (NAN, ValueError)],
    ids=_repr,
)
def test_bad_input_threading_timer_interval(interval, exc, no_thread_leak):
    _expect(exc, lambda: compat_threading.Timer(interval, print), "interval", interval)


def test_bad_input_threading_timer_misuse(no_thread_leak, fake_clock):
    _expect(TypeError, lambda: compat_threading.Timer(1, 5), "function", 5)
    _expect(TypeError, lambda: compat_threading.Timer(1, print, timer=5), "timer", 5)
    with timer_mod.SystemTimer(name="bad-threading", clock=fake_clock) as own:
        t = compat_threading.Timer(60, print, timer=own)
        t.start()
        with pytest.raises(RuntimeError):
            t.start()  # as threading.Thread: threads can only be started once
        assert len(own) == 1
        t.cancel()
        assert len(own) == 0
        own._check()


@pytest.mark.parametrize(
    ("call", "name", "value", "exc"),
    [
        ("call_later", "delay", "1", TypeError),
        ("call_later", "delay", None, TypeError),
        ("call_later", "delay", NAN, ValueError),
        ("call_at", "when", "1", TypeError),
        ("call_at", "when", None, TypeError),
    ],
    ids=lambda v: repr(v)[:20],
)
def test_bad_input_asyncio_wheel(call, name, value, exc):
    loop = asyncio.new_event_loop()
    try:
        wheel = compat_asyncio.TimerWheel(loop)
        kept = wheel.call_later(100, print)
        _expect(exc, lambda: getattr(wheel, call)(value, print), name, value)
        _expect(TypeError, lambda: getattr(wheel, call)(1, 5), "callback", 5)
        assert len(wheel) == 1 and not kept.cancelled()
        wheel._check()
        kept.cancel()
        wheel.close()
    finally:
        loop.close()
    _expect(TypeError, lambda: compat_asyncio.TimerWheel(5), "loop", 5)  # type: ignore[arg-type]
