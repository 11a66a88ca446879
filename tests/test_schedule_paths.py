"""schedule(delay_ms, fn) takes a short path; it must agree with the long one.

On GIL builds the compiled ``TimerCore.schedule`` with an int delay and no
extra arguments makes the task in place and links it in one C frame; every
other call (extra arguments, a float delay, ``schedule_as``, ``add``) goes
through the general path.  These tests run the same adds both ways on twin
timers and compare everything a task and its timer report, on both cores.
"""

from __future__ import annotations

import gc
import inspect
import math
import random
import time
import weakref
from types import ModuleType
from typing import Any

import pytest

NS = 1_000_000

DELAYS = [-5, 0, 1, 2, 19, 20, 21, 399, 400, 401, 7_999, 8_000, 159_999, 160_000,
          3_200_001, 2**30 - 1, 2**30, 10**9]
CLOCKS = [0, 1, 999_999, 1_000_000, 123_456_789, -7_500_001, 86_400 * 10**9 + 3]


def _noop() -> None:
    pass


def _report(core: Any, task: Any) -> tuple[Any, ...]:
    return (
        task.state,
        task.expiration_ms,
        task.deadline_ns,
        task.delay_ms,
        type(task.delay_ms),
        task.fn is _noop,
        task.args,
        len(core),
        core.next_expiration_ms,
    )


def _pair(impl: ModuleType, now_ns: int, tick_ms: int, wheel_size: int) -> list[Any]:
    cores = [impl.TimerCore(tick_ms, wheel_size, start_ms=now_ns // NS, manual=True)
             for _ in range(2)]
    for core in cores:
        core.now_ns = now_ns
    return cores


@pytest.mark.parametrize("tick_ms,wheel_size", [(1, 20), (7, 2), (1, 3)])
@pytest.mark.parametrize("now_ns", CLOCKS)
def test_short_path_agrees_with_the_general_one(
    impl: ModuleType, now_ns: int, tick_ms: int, wheel_size: int
) -> None:
    fast, slow = _pair(impl, now_ns, tick_ms, wheel_size)
    for delay in DELAYS:
        a = fast.schedule(delay, _noop)
        b = slow.schedule_as(impl.TimerTask, delay, _noop)
        assert _report(fast, a) == _report(slow, b), (delay, now_ns)
    # Same ready tasks, then the same expiries in the same order as time passes.
    key = [(t.delay_ms, t.expiration_ms) for t in fast._take_ready()]
    assert key == [(t.delay_ms, t.expiration_ms) for t in slow._take_ready()]
    for step in (1, 19, 400, 8_000, 160_000, 3_200_000, 10**9 + 1):
        now_ms = -(-now_ns // NS) + step
        got = [(t.delay_ms, t.expiration_ms) for t in fast._take_due(now_ms)]
        want = [(t.delay_ms, t.expiration_ms) for t in slow._take_due(now_ms)]
        assert got == want, step
    assert len(fast) == len(slow)


def test_short_path_wakes_the_driver_as_the_general_one(impl: ModuleType) -> None:
    # _on_wake: a task due at once, or a bucket that became the queue's head.
    class Core(impl.TimerCore):
        def __init__(self) -> None:
            super().__init__(manual=True)
            self.wakes = 0

        def _on_wake(self) -> None:
            self.wakes += 1

    fast, slow = Core(), Core()
    for delay in (50, 40, 60, 40, 0, 3_000, 10, -1, 10):
        fast.schedule(delay, _noop)
        slow.schedule_as(impl.TimerTask, delay, _noop)
        assert fast.wakes == slow.wakes, delay
    # 50 (the first bucket), 0 and -1 (due), 10 (a bucket before 50's);
    # 40 shares 50's 20 ms bucket of the second level.
    assert fast.wakes == 4


def test_short_path_refuses_what_the_general_one_refuses(impl: ModuleType) -> None:
    # The latest clock reading the cores accept, and the longest delay.
    core = impl.TimerCore(start_ms=2**62 // NS, clock=lambda: 2**62)
    with pytest.raises(OverflowError, match="past the end of the clock range"):
        core.schedule(impl.MAX_DELAY_MS, _noop)
    with pytest.raises(OverflowError, match="past the end of the clock range"):
        core.schedule_as(impl.TimerTask, impl.MAX_DELAY_MS, _noop)
    assert len(core) == 0
    core = impl.TimerCore(manual=True)
    core._close_core()
    with pytest.raises(RuntimeError, match="closed"):
        core.schedule(5, _noop)
    with pytest.raises(TypeError, match="fn must be callable"):
        impl.TimerCore(manual=True).schedule(5, "not callable")


def test_short_path_reads_a_clock_given_as_a_callable(impl: ModuleType) -> None:
    reads = []
    core = impl.TimerCore(clock=lambda: reads.append(1) or 5 * NS + 1)
    before = len(reads)
    task = core.schedule(10, _noop)
    assert len(reads) == before + 1
    assert task.deadline_ns == 15 * NS + 1 and task.expiration_ms == 16
    with pytest.raises(ZeroDivisionError):
        impl.TimerCore(clock=lambda: 1 // 0).schedule(10, _noop)


@pytest.mark.parametrize("how", ["schedule", "schedule-args", "add", "add-again"])
def test_real_clock_brackets_every_deadline(impl: ModuleType, how: str) -> None:
    # On the C clock the compiled core takes the level and bucket of a whole
    # number of ms from the millisecond of the timer's last reading, and the
    # new reading only decides whether that millisecond still holds.  Across
    # many millisecond boundaries every task must still get now + delay: a
    # deadline between clock readings taken just before and just after the
    # call, its expiration that deadline rounded up.
    core = impl.TimerCore()
    delays = [1, 2, 19, 20, 21, 401, 8_001, 30_000, 2**30, 1.5, 0.25]
    rows = []
    moved = impl.TimerTask(1, _noop)
    start = time.monotonic_ns()
    while len(rows) < 20_000 or time.monotonic_ns() - start < 5 * NS:
        d = delays[len(rows) % len(delays)]
        if how == "schedule":
            t0 = time.monotonic_ns()
            task = core.schedule(d, _noop)
        elif how == "schedule-args":
            t0 = time.monotonic_ns()
            task = core.schedule(d, _noop, 1)
        else:
            task = moved if how == "add-again" else impl.TimerTask(d, _noop)
            task.delay_ms = d
            t0 = time.monotonic_ns()
            core.add(task)
        t1 = time.monotonic_ns()
        rows.append((t0, t1, d, task.deadline_ns, task.expiration_ms, task.state))
        if how != "add-again":
            task.cancel()
    assert rows[-1][1] // NS - rows[0][0] // NS >= 5  # boundaries were crossed
    bad = [
        r for r in rows
        if not (r[0] + math.ceil(r[2] * NS) <= r[3] <= r[1] + math.ceil(r[2] * NS)
                and r[4] == -(-r[3] // NS) and r[5] == "pending")
    ]
    assert bad == []
    assert len(core) == (1 if how == "add-again" else 0)


def test_short_path_on_a_wheel_ahead_of_the_clock(impl: ModuleType) -> None:
    # A wheel polled ahead of the clock (the driver passed a later time)
    # holds no slot for a task due before its own clock: schedule() makes it
    # ready as the general path does.
    cores = [impl.TimerCore() for _ in range(2)]
    for core in cores:
        core.schedule(5_000, _noop)
        assert len(core._take_due(core.now_ns // NS + 10_000)) == 1
    short = cores[0].schedule(3, _noop)
    general = cores[1].schedule_as(impl.TimerTask, 3, _noop)
    assert short.state == general.state == "expired"
    assert len(cores[0]) == len(cores[1]) == 2  # with the one polled above


def test_cancel_is_a_method_of_no_arguments(impl: ModuleType) -> None:
    task = impl.TimerTask(5, _noop)
    assert list(inspect.signature(impl.TimerTask.cancel).parameters) == ["self"]
    assert "Stop the task from running" in impl.TimerTask.cancel.__doc__
    with pytest.raises(TypeError):
        impl.TimerTask.cancel(task, 1)
    with pytest.raises((TypeError, AttributeError)):  # the twin: AttributeError
        impl.TimerTask.cancel(object())
    core = impl.TimerCore(manual=True)
    task = core.schedule(5, _noop)
    assert impl.TimerTask.cancel(task) is True and task.cancel() is False
    assert len(core) == 0


class _Callable:
    def __call__(self) -> None:
        pass


@pytest.mark.parametrize("subclass", [False, True])
def test_a_freed_task_lets_go_of_its_callable(impl: ModuleType, subclass: bool) -> None:
    # An exact TimerTask goes back to the freelist, a subclass through
    # Python's subtype dealloc: both drop the callable.
    cls = type("Sub", (impl.TimerTask,), {}) if subclass else impl.TimerTask
    core = impl.TimerCore(manual=True)
    fn = _Callable()
    ref = weakref.ref(fn)
    task = core.schedule_as(cls, 5, fn) if subclass else core.schedule(5, fn)
    del fn
    assert ref() is not None
    assert core._take_due(10) == [task]
    task.run()
    del task
    gc.collect()
    assert ref() is None


class _Held:
    pass


@pytest.mark.parametrize(
    "how", ["constructed", "scheduled", "timer-dropped", "subclass", "subclass-del"]
)
def test_a_dropped_task_lets_go_of_what_it_holds(impl: ModuleType, how: str) -> None:
    # Freeing a task that never ran drops its callable and its arguments:
    # TimerTask's tp_dealloc (its own on GIL builds) for an exact task, the
    # same body under Python's subtype dealloc for a subclass, whose
    # finalizer runs once first.
    fn, arg = _Callable(), _Held()
    refs = [weakref.ref(fn), weakref.ref(arg)]
    finalized: list[Any] = []

    class Sub(impl.TimerTask):
        pass

    class SubDel(impl.TimerTask):
        def __del__(self) -> None:
            finalized.append(self.fn is not None)

    core = impl.TimerCore(manual=True)
    if how == "constructed":
        task = impl.TimerTask(5, fn, arg)
    elif how == "scheduled":
        task = core.schedule(5, fn, arg)
        assert core._take_due(10) == [task]  # expired, never run
    elif how == "timer-dropped":
        task = core.schedule(5, fn, arg)  # pending when its timer goes
        del core
    else:
        task = (Sub if how == "subclass" else SubDel)(5, fn, arg)
    del fn, arg
    assert [r() is not None for r in refs] == [True, True]
    del task
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert finalized == ([True] if how == "subclass-del" else [])


def test_exact_tasks_return_to_the_freelist(impl: ModuleType) -> None:
    if impl.__name__ != "tickwheel._wheel" or impl._compat()["freelist"] == "none":
        pytest.skip("the freelist exists in the compiled core of GIL builds only")
    _wheel = impl
    core = _wheel.TimerCore(manual=True)
    tasks = [core.schedule(5, _noop) for _ in range(10)]
    before = _wheel._freelist_size()
    for t in tasks:
        t.cancel()
    del tasks, t
    assert _wheel._freelist_size() == min(before + 10, 256)
    again = core.schedule(5, _noop)
    assert _wheel._freelist_size() == min(before + 10, 256) - 1
    assert again.state == "pending" and len(core) == 1


def _kafka_bucket(wheel: Any, expiration: int) -> Any:
    # Kafka's TimingWheel.add: the first level, each at its own clock, whose
    # interval holds the expiration; there the bucket of expiration // tick.
    w = wheel
    while expiration - w.current_time_ms >= w.interval_ms:
        w = w.overflow_wheel
    return w.bucket(expiration // w.tick_ms % w.wheel_size)


def test_short_path_links_where_kafka_does(impl: ModuleType) -> None:
    # On the C clock the compiled schedule() takes the level from its own
    # table of the levels (every level tested at once) instead of walking
    # up the chain.  Every task must still land in Kafka's bucket while the
    # wheel's clock moves and levels are added, through schedule() and
    # behind the table's back (add).
    rnd = random.Random(27)
    core = impl.TimerCore()
    checked = 0
    for step in range(40):
        if step % 10 == 5:
            core.add(impl.TimerTask(2 ** (30 + step // 10), _noop))
        ahead = max(0, core.wheel.current_time_ms - core.now_ns // NS)
        for _ in range(500):
            d = ahead + rnd.choice(
                (rnd.randint(1, 40), rnd.randint(1, 30_000), rnd.randint(1, 2**35))
            )
            task = core.schedule(d, _noop)
            assert task.state == "pending", d
            assert task.list is _kafka_bucket(core.wheel, task.expiration_ms), d
            checked += 1
        core._take_due(core.now_ns // NS + rnd.randint(1, 3_000))
    assert checked == 20_000 and core.wheel.levels() >= 9


def test_short_path_keeps_a_table_of_the_levels(impl: ModuleType) -> None:
    if impl.__name__ != "tickwheel._wheel" or impl._compat()["free_threaded"]:
        pytest.skip("the compiled core's schedule() on GIL builds only")
    core = impl.TimerCore()
    assert impl._level_table(core) == 0
    core.schedule(30_000, _noop)  # four levels: 20 ms, 400 ms, 8 s, 160 s
    assert impl._level_table(core) == core.wheel.levels() == 4
    core.add(impl.TimerTask(2**31, _noop))  # levels the table does not know
    assert impl._level_table(core) == 4 < core.wheel.levels()
    task = core.schedule(2**31, _noop)
    assert impl._level_table(core) == core.wheel.levels()
    assert task.list is _kafka_bucket(core.wheel, task.expiration_ms)
    # A timer set up again has a new wheel: the table starts over.
    core.__init__()
    assert impl._level_table(core) == 0
    task = core.schedule(30_000, _noop)
    gc.collect()
    assert task.list is _kafka_bucket(core.wheel, task.expiration_ms)
    assert impl._level_table(core) == core.wheel.levels() == 4
