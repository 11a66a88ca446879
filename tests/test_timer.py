"""SystemTimer and MockTimer, on both core implementations.

MockTimer and a fake clock carry the semantics; only the tests marked
``slow`` wait for real time (the reaper must fire on its own), and they
assert ordering and "never early", not durations.
"""

from __future__ import annotations

import collections
import concurrent.futures
import gc
import logging
import math
import sys
import threading
import time
import weakref

import pytest

from tickwheel import MAX_DELAY_MS

# -- MockTimer semantics ------------------------------------------------------


def test_mock_runs_task_when_clock_reaches_deadline(timers):
    timer = timers.MockTimer()
    fired = []
    timer.schedule(10, fired.append, "a")
    assert timer.advance_clock(9) is False and fired == []
    assert len(timer) == 1
    assert timer.advance_clock(1) is True  # Kafka's mock would need 11
    assert fired == ["a"] and len(timer) == 0
    timer._check()


def test_mock_runs_in_deadline_order_with_now_at_deadline(timers):
    timer = timers.MockTimer(start_ms=100)
    seen = []
    for delay in (50, 5, 700, 20, 20, 3000, 1):
        timer.schedule(delay, lambda d=delay: seen.append((d, timer.now_ms)))
        timer._check()
    assert timer.advance_clock(5000)
    assert [d for d, _ in seen] == [1, 5, 20, 20, 50, 700, 3000]
    assert all(now == 100 + d for d, now in seen)
    assert timer.now_ms == 5100


def test_mock_discrete_event_chain_runs_in_same_advance(timers):
    timer = timers.MockTimer()
    times = []

    def hop(n):
        times.append(timer.now_ms)
        if n:
            timer.schedule(7, hop, n - 1)  # due 7 ms after *this* task's deadline

    timer.schedule(7, hop, 5)
    timer.advance_clock(40)
    assert times == [7, 14, 21, 28, 35]
    assert len(timer) == 1  # the sixth hop is due at 42
    timer.advance_clock(2)
    assert times[-1] == 42 and len(timer) == 0


def test_mock_already_due_runs_inside_add(timers):
    # Kafka's "already expired" test: delays -5..-1 all run.
    timer = timers.MockTimer()
    ran = []
    for delay in range(-5, 0):
        task = timers.TimerTask(delay, ran.append, delay)
        timer.add(task)
        assert task.done  # synchronously inside add
    assert ran == [-5, -4, -3, -2, -1]
    timer.schedule(0, ran.append, 0)
    assert ran[-1] == 0 and len(timer) == 0


def test_mock_expiration_kafka_ids(timers):
    # Kafka's TimerTest.testTaskExpiration on the manual clock, with order.
    timer = timers.MockTimer()
    ids = (
        list(range(5))
        + [i for i in range(10, 100) for _ in (0, 1)]
        + list(range(100, 500))
    )
    runs = collections.Counter()
    order = []
    for i in ids:
        timer.schedule(i, lambda i=i: (runs.update([i]), order.append(i)))
    timer._check()
    assert order == [0]  # delay 0 is already due: it ran inside add()
    assert len(timer) == len(ids) - 1
    timer.advance_clock(600)
    assert runs == collections.Counter(ids)
    assert order == sorted(ids)
    assert len(timer) == 0
    timer._check()


def test_mock_tick_rounds_up_never_early(timers):
    timer = timers.MockTimer(tick_ms=10)
    seen = []
    timer.schedule(5, lambda: seen.append(timer.now_ms))
    timer.advance_clock(9)
    assert seen == []
    timer.advance_clock(1)
    assert seen == [10]


def test_mock_float_delays_round_up(timers):
    timer = timers.MockTimer()
    seen = []
    timer.schedule(2.5, lambda: seen.append(timer.now_ms))
    timer.advance_clock(2)
    assert seen == []
    timer.advance_clock(1)
    assert seen == [3]


def test_mock_readd_moves_pending_task(timers):
    timer = timers.MockTimer()
    fired = []

    class Beat(timers.TimerTask):
        def run(self):
            fired.append(timer.now_ms)

    task = Beat(10)
    timer.add(task)
    timer.advance_clock(5)
    task.delay_ms = 20
    timer.add(task)  # moves: now due at 25
    assert len(timer) == 1
    timer._check()
    timer.advance_clock(15)
    assert fired == []
    timer.advance_clock(5)
    assert fired == [25]
    timer.add(task)  # a subclass can be re-added after it ran
    timer.advance_clock(20)
    assert fired == [25, 45]


def test_mock_periodic_readd_from_inside_run(timers):
    timer = timers.MockTimer()
    fired = []

    def again():
        fired.append(timer.now_ms)
        if len(fired) < 4:
            timer.add(task)

    task = timers.TimerTask(10, again)
    timer.add(task)
    timer.advance_clock(100)
    assert fired == [10, 20, 30, 40]
    assert task.done and task.fn is None  # released after its last run


def test_cancel_is_idempotent_and_exact(timers):
    timer = timers.MockTimer()
    fired = []
    tasks = [timer.schedule(10 + i, fired.append, i) for i in range(10)]
    assert all(t.pending for t in tasks)
    assert tasks[3].cancel() is True
    assert tasks[3].cancel() is False
    assert tasks[3].cancelled and not tasks[3].pending
    assert len(timer) == 9
    timer._check()
    timer.advance_clock(100)
    assert fired == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert tasks[0].cancel() is False  # already ran: no effect
    assert not tasks[0].cancelled and tasks[0].done


def test_cancel_from_earlier_task_in_same_tick(timers):
    timer = timers.MockTimer()
    fired = []
    victim = timers.TimerTask(10, fired.append, "victim")

    def killer():
        fired.append("killer")
        assert victim.cancel() is True  # expired, not started: still cancellable

    timer.schedule(10, killer)
    timer.add(victim)
    timer.advance_clock(10)
    assert fired == ["killer"]
    assert len(timer) == 0


def test_cancelled_callable_is_released(timers):
    timer = timers.MockTimer()

    class Owner:
        pass

    owner = Owner()
    owner.task = timer.schedule(5, print, owner)  # a cycle through the task
    owner.task.cancel()
    assert owner.task.fn is None and owner.task.args == ()
    with pytest.raises(RuntimeError, match="schedule a new task"):
        timer.add(owner.task)


def test_cancel_drops_exactly_the_tasks_references(timers):
    # cancel() moves the callable out of the task (free-threaded builds) or
    # clears it: either way each cancelled task gives back the one reference
    # it took, no more (a double release would free a live callable), and
    # the arguments go too.
    timer = timers.SystemTimer("refs", reaper=False)

    def shared():
        pass

    arg = object()
    before_fn, before_arg = sys.getrefcount(shared), sys.getrefcount(arg)
    tasks = [timer.schedule(60_000, shared, arg) for _ in range(100)]
    assert sys.getrefcount(shared) == before_fn + 100
    assert all(task.cancel() for task in tasks)
    assert sys.getrefcount(shared) == before_fn
    assert sys.getrefcount(arg) == before_arg
    assert not any(task.cancel() for task in tasks)  # a second cancel frees nothing
    assert sys.getrefcount(shared) == before_fn and len(timer) == 0
    timer.close()


def test_callable_released_by_cancel_may_use_the_timer(timers):
    # The callable's last reference goes after the timer's lock is released:
    # a __del__ that schedules and cancels on the same timer does not
    # deadlock (the lock is not reentrant with the GIL off).
    timer = timers.MockTimer()
    seen = []

    class Callback:
        def __call__(self):
            pass

        def __del__(self):
            task = timer.schedule(5, seen.append, "from __del__")
            seen.append(task.cancel())

    task = timer.schedule(10, Callback())
    assert task.cancel() and seen == [True] and len(timer) == 0


def test_exception_in_task_goes_to_on_error_and_others_run(timers):
    errors = []
    timer = timers.MockTimer(on_error=lambda task, exc: errors.append((task, exc)))
    fired = []

    def boom():
        raise ValueError("boom")

    bad = timer.schedule(5, boom)
    timer.schedule(5, fired.append, 1)
    timer.schedule(6, fired.append, 2)
    assert timer.advance_clock(10)
    assert fired == [1, 2]
    assert len(errors) == 1 and errors[0][0] is bad
    assert isinstance(errors[0][1], ValueError)
    assert bad.done


def test_default_error_handler_logs(timers, caplog):
    timer = timers.MockTimer()
    timer.schedule(1, lambda: 1 / 0)
    with caplog.at_level(logging.ERROR, logger="tickwheel"):
        timer.advance_clock(1)
    assert "raised" in caplog.text and "ZeroDivisionError" in caplog.text


def test_base_exception_propagates_then_backlog_runs(timers):
    timer = timers.MockTimer()
    fired = []

    def interrupt():
        raise KeyboardInterrupt

    timer.schedule(5, fired.append, "before")
    timer.schedule(5, interrupt)
    timer.schedule(5, fired.append, "after")
    with pytest.raises(KeyboardInterrupt):
        timer.advance_clock(5)
    assert len(timer) == 1  # "after" is due and still counted: nothing lost
    timer.advance_clock(0)
    assert fired == ["before", "after"] and len(timer) == 0


def test_mock_advance_to(timers):
    timer = timers.MockTimer(start_ms=50)
    fired = []
    timer.schedule(10, fired.append, 1)
    assert timer.advance_to(60) is True
    assert fired == [1] and timer.now_ms == 60
    with pytest.raises(ValueError, match="before now_ms=60"):
        timer.advance_to(59)


def test_mock_close_cancels_and_refuses(timers):
    timer = timers.MockTimer()
    task = timer.schedule(5, print)
    with timer:
        pass
    assert task.cancelled and len(timer) == 0
    timer.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        timer.schedule(1, print)
    with pytest.raises(RuntimeError, match="closed"):
        timer.add(timers.TimerTask(1, print))


def test_task_pending_in_other_timer_refused(timers):
    a, b = timers.MockTimer(), timers.MockTimer()
    task = a.schedule(5, print)
    with pytest.raises(ValueError, match="another timer"):
        b.add(task)
    assert len(a) == 1 and len(b) == 0 and task.pending


def test_far_future_and_huge_jumps(timers):
    timer = timers.MockTimer()
    fired = []
    for delay in (1, 10**3, 10**6, 10**9, 10**12):
        timer.schedule(delay, fired.append, delay)
    timer._check()
    assert timer.wheel.levels() >= 5
    timer.advance_clock(10**12 - 1)
    assert fired == [1, 10**3, 10**6, 10**9]
    timer.advance_clock(1)
    assert fired[-1] == 10**12 and len(timer) == 0
    timer._check()


# -- bad input ------------------------------------------------------------------


@pytest.mark.parametrize(
    "delay, exc, match",
    [
        (math.nan, ValueError, "delay_ms must be finite, got nan"),
        (math.inf, ValueError, "delay_ms must be finite, got inf"),
        (-math.inf, ValueError, "delay_ms must be finite, got -inf"),
        ("10", TypeError, "delay_ms must be a number of milliseconds, got '10'"),
        (None, TypeError, "delay_ms must be a number of milliseconds, got None"),
        (True, TypeError, "delay_ms must be a number of milliseconds, got True"),
        (2**63, OverflowError, "delay_ms=9223372036854775808 is out of range"),
        (-(2**64), OverflowError, "out of range"),
        (MAX_DELAY_MS + 1, OverflowError, "out of range"),
        (1e300, OverflowError, "out of range"),
    ],
)
def test_bad_delay_rejected_everywhere(timers, delay, exc, match):
    timer = timers.MockTimer()
    with pytest.raises(exc, match=match):
        timer.schedule(delay, print)
    with pytest.raises(exc, match=match):
        timers.TimerTask(delay, print)
    task = timers.TimerTask(1, print)
    with pytest.raises(exc, match=match):
        task.delay_ms = delay
    assert task.delay_ms == 1
    assert len(timer) == 0
    timer._check()


@pytest.mark.parametrize(
    "delay",
    # Around the compiled core's one-digit fast path (|v| < 2**30) and the
    # edges of the range, which take PyLong_AsLongLongAndOverflow instead.
    [
        0,
        1,
        -1,
        2**15,
        2**30 - 1,
        2**30,
        2**30 + 1,
        -(2**30) + 1,
        -(2**30),
        2**31,
        2**40,
        MAX_DELAY_MS,
        -MAX_DELAY_MS,
    ],
)
def test_int_delays_read_back_and_set_the_deadline(timers, delay):
    timer = timers.MockTimer(start_ms=0)
    task = timer.schedule(delay, int)
    assert task.delay_ms == delay and type(task.delay_ms) is int
    if delay > 0:
        assert task.expiration_ms == delay and len(timer) == 1
        assert task.pending and not timer.advance_clock(delay - 1)
    assert timers.TimerTask(delay, int).delay_ms == delay
    timer.cancel_all()
    timer._check()


def test_bad_fn_and_task_rejected(timers):
    timer = timers.MockTimer()
    with pytest.raises(TypeError, match="fn must be callable, got 42"):
        timer.schedule(1, 42)
    with pytest.raises(TypeError, match="fn must be callable, got 'x'"):
        timers.TimerTask(1, "x")
    with pytest.raises(TypeError, match="task must be a TimerTask, got 'task'"):
        timer.add("task")
    with pytest.raises(TypeError):
        timer.schedule(1)
    assert len(timer) == 0


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"tick_ms": 0}, ValueError, "tick_ms must be >= 1, got 0"),
        ({"wheel_size": 1}, ValueError, "wheel_size must be >= 2, got 1"),
        ({"tick_ms": 2.0}, TypeError, "tick_ms must be an int, got 2.0"),
        ({"start_ms": "0"}, TypeError, "start_ms must be an int"),
    ],
)
def test_mock_bad_constructor(timers, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        timers.MockTimer(**kwargs)


@pytest.mark.parametrize("ms", [-1, math.nan, math.inf, "5", None, True])
def test_mock_bad_advance(timers, ms):
    timer = timers.MockTimer()
    with pytest.raises((TypeError, ValueError)) as err:
        timer.advance_clock(ms)
    assert "ms" in str(err.value) and repr(ms) in str(err.value)
    assert timer.now_ms == 0


def test_kwargs_and_numeric_types(timers):
    import fractions

    timer = timers.MockTimer()
    out = []
    timer.schedule(fractions.Fraction(3, 2), lambda **kw: out.append(kw), a=1)
    timer.advance_clock(2)
    assert out == [{"a": 1}]
    task = timers.TimerTask(2.0, print)
    assert task.delay_ms == 2.0 and isinstance(task.delay_ms, float)


# -- SystemTimer on a fake clock (deterministic, no sleeping) -----------------


def test_system_fake_clock_advance_clock(timers, fake_clock, no_thread_leak):
    timer = timers.SystemTimer(reaper=False, executor="inline", clock=fake_clock)
    fired = []
    timer.schedule(10, fired.append, "a")
    timer.schedule(20, fired.append, "b")
    assert timer.advance_clock(0) is False
    fake_clock.advance_ms(9.999)
    assert timer.advance_clock(0) is False  # never early, even by a microsecond
    fake_clock.advance_ms(0.001)
    assert timer.advance_clock(0) is True
    assert fired == ["a"] and len(timer) == 1
    fake_clock.advance_ms(100)
    assert timer.advance_clock(0) is True
    assert fired == ["a", "b"]
    timer.close()


def test_system_fake_clock_sub_ms_now_not_truncated(timers, fake_clock, no_thread_leak):
    # Kafka truncates "now" to the ms and can fire up to 1 ms early.
    fake_clock.ns += 900_000  # now = 1000.9 ms
    timer = timers.SystemTimer(reaper=False, executor="inline", clock=fake_clock)
    fired = []
    timer.schedule(1, fired.append, 1)  # deadline 1001.9 ms
    fake_clock.ns = 1_001_000_000 + 899_999
    timer.advance_clock(0)
    assert fired == []
    fake_clock.ns = 1_002_000_000
    timer.advance_clock(0)
    assert fired == [1]
    timer.close()


def test_system_due_task_never_runs_on_caller_thread(timers, no_thread_leak):
    ran_on = []
    done = threading.Event()
    with timers.SystemTimer() as timer:
        timer.schedule(
            -1, lambda: (ran_on.append(threading.current_thread()), done.set())
        )
        assert done.wait(10)
    assert ran_on[0] is not threading.current_thread()
    assert ran_on[0].name == "tickwheel-executor"


def test_system_executor_variants(timers, no_thread_leak):
    for executor in ("inline", concurrent.futures.ThreadPoolExecutor(2, "pool")):
        names = []
        done = threading.Event()
        with timers.SystemTimer(name="x", executor=executor) as timer:
            timer.schedule(
                1, lambda: (names.append(threading.current_thread().name), done.set())
            )
            assert done.wait(10)
        expected = "x-reaper" if executor == "inline" else "pool"
        assert names[0].startswith(expected)
        if executor != "inline":
            executor.shutdown()


def test_system_executor_shutdown_cancels_due_tasks(
    timers, fake_clock, no_thread_leak, caplog
):
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.shutdown()
    timer = timers.SystemTimer(reaper=False, executor=pool, clock=fake_clock)
    task = timer.schedule(1, print)
    fake_clock.advance_ms(1)
    with caplog.at_level(logging.ERROR, logger="tickwheel"):
        timer.advance_clock(0)
    assert task.cancelled and len(timer) == 0
    assert "refused" in caplog.text
    timer.close()


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"executor": "threads"}, TypeError, "executor must be None, 'inline'"),
        ({"name": ""}, TypeError, "name must be a non-empty str"),
        ({"tick_ms": 0}, ValueError, "tick_ms must be >= 1, got 0"),
        ({"on_error": 3}, TypeError, "on_error must be callable, got 3"),
        ({"clock": 3}, TypeError, "clock must be callable, got 3"),
    ],
)
def test_system_bad_constructor_starts_no_thread(
    timers, kwargs, exc, match, no_thread_leak
):
    with pytest.raises(exc, match=match):
        timers.SystemTimer(**kwargs)


def test_system_close_idempotent_and_refuses(timers, no_thread_leak):
    timer = timers.SystemTimer()
    task = timer.schedule(10_000, print)
    threads = timer.threads
    assert {t.name for t in threads} == {"tickwheel-reaper", "tickwheel-executor"}
    assert all(t.daemon for t in threads)
    timer.close()
    timer.close()
    assert not any(t.is_alive() for t in threads)
    assert task.cancelled and len(timer) == 0
    with pytest.raises(RuntimeError, match="closed"):
        timer.schedule(1, print)


# -- SystemTimer with the real reaper (real time) ------------------------------


@pytest.mark.slow
def test_system_reaper_fires_on_its_own_in_order(timers, no_thread_leak):
    fired = []
    done = threading.Event()
    with timers.SystemTimer() as timer:
        start = time.monotonic_ns()
        for delay in (300, 100, 200):
            timer.schedule(
                delay,
                lambda d=delay: (
                    fired.append((d, time.monotonic_ns() - start)),
                    len(fired) == 3 and done.set(),
                ),
            )
        assert done.wait(10)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 2  # close() does not wait out a poll interval
    assert [d for d, _ in fired] == [100, 200, 300]
    for delay, elapsed_ns in fired:
        assert elapsed_ns >= delay * 1_000_000  # never early


@pytest.mark.slow
def test_system_reaper_wakes_for_earlier_bucket(timers, no_thread_leak):
    # The reaper sleeps until a 60 s bucket; a 20 ms task must still fire
    # promptly because add() wakes it (no poll interval to wait out).
    done = threading.Event()
    with timers.SystemTimer() as timer:
        timer.schedule(60_000, print)
        time.sleep(0.05)  # let the reaper go to sleep on the far bucket
        timer.schedule(20, done.set)
        assert done.wait(10)


@pytest.mark.slow
def test_system_expiration_kafka_ids(timers, no_thread_leak):
    # Kafka's TimerTest.testTaskExpiration with the real reaper.
    ids = (
        list(range(5))
        + [i for i in range(10, 100) for _ in (0, 1)]
        + list(range(100, 500))
    )
    runs = collections.Counter()
    lock = threading.Lock()
    latch = threading.Semaphore(0)
    early = []
    with timers.SystemTimer() as timer:
        for i in ids:
            scheduled = time.monotonic_ns()

            def run(i=i, scheduled=scheduled):
                if time.monotonic_ns() - scheduled < i * 1_000_000:
                    early.append(i)
                with lock:
                    runs[i] += 1
                latch.release()

            timer.schedule(i, run)
        for _ in ids:
            assert latch.acquire(timeout=10)
        assert len(timer) == 0
    assert runs == collections.Counter(ids)
    assert early == []


@pytest.mark.slow
def test_system_raising_task_does_not_kill_reaper(timers, no_thread_leak):
    done = threading.Event()
    errors = []
    with timers.SystemTimer(on_error=lambda t, e: errors.append(e)) as timer:
        timer.schedule(1, lambda: 1 / 0)
        timer.schedule(5, lambda: (_ for _ in ()).throw(SystemExit))
        timer.schedule(30, done.set)
        assert done.wait(10)
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)


@pytest.mark.slow
def test_system_close_from_inside_task(timers, no_thread_leak):
    closed = threading.Event()
    timer = timers.SystemTimer(executor="inline")
    timer.schedule(1, lambda: (timer.close(), closed.set()))
    timer.schedule(10_000, print)
    assert closed.wait(10)
    for thread in timer.threads:
        thread.join(10)
        assert not thread.is_alive()
    assert len(timer) == 0


# -- schedule_as: the fast path for TimerTask subclasses -----------------------


def test_schedule_as_builds_subclass_without_init(timers):
    timer = timers.MockTimer()
    seen = []

    class Handle(timers.TimerTask):
        __slots__ = ("tag",)

        def __init__(self, *args):  # pragma: no cover - must not run
            raise AssertionError("schedule_as must not call __init__")

        def run(self):
            seen.append((self.tag, self.fn, self.args, timer.now_ms))

    handle = timer.schedule_as(Handle, 5, print, 1, 2)
    assert type(handle) is Handle and handle.pending and len(timer) == 1
    assert handle.delay_ms == 5 and handle.fn is print and handle.args == (1, 2)
    with pytest.raises(AttributeError):
        handle.tag  # slots of the subclass start unset
    handle.tag = "t"
    timer.advance_clock(5)
    assert seen == [("t", print, (1, 2), 5)]
    assert timer.schedule_as(timers.TimerTask, 1, seen.append, "plain").pending
    timer.advance_clock(1)
    assert seen[-1] == "plain"
    timer._check()


def test_schedule_as_respects_a_custom_new(timers):
    timer = timers.MockTimer()
    made = []

    class Counted(timers.TimerTask):
        def __new__(cls, *args, **kwargs):
            made.append(cls)
            return super().__new__(cls)

    task = timer.schedule_as(Counted, 3, print)
    assert made == [Counted] and task.pending and task.__dict__ == {}
    assert task.cancel() and len(timer) == 0


@pytest.mark.parametrize(
    "args, exc, match",
    [
        (
            (int, 5, print),
            TypeError,
            "task_type must be a TimerTask subclass, got <class 'int'>",
        ),
        (("x", 5, print), TypeError, "task_type must be a TimerTask subclass, got 'x'"),
        ((None, 5, print), TypeError, "task_type must be a TimerTask subclass"),
        (("T", 5, 3), TypeError, "fn must be callable, got 3"),
        (("T", math.nan, print), ValueError, "delay_ms must be finite, got nan"),
        (("T", True, print), TypeError, "delay_ms must be a number"),
        (("T", 2**64, print), OverflowError, "out of range"),
    ],
)
def test_schedule_as_bad_input(timers, args, exc, match):
    timer = timers.MockTimer()
    args = tuple(timers.TimerTask if a == "T" else a for a in args)
    with pytest.raises(exc, match=match):
        timer.schedule_as(*args)
    with pytest.raises(TypeError):
        timer.schedule_as(timers.TimerTask, 5)
    assert len(timer) == 0
    timer._check()


def test_the_timer_owns_pending_tasks_and_lets_go_of_done_ones(timers):
    """No handle needed to keep a pending task alive, none held after it ends.

    Covers every path a node takes: straight into a bucket, cascaded down a
    level, a bucket of 100 emptied at once, cancelled, re-added, run.
    """

    class Task(timers.TimerTask):
        pass  # a subclass, for the weak reference

    timer = timers.MockTimer()
    fired = []

    def record():
        fired.append(timer.now_ms)  # a task's deadline while it runs

    refs = []
    for delay in [5, 30, 500, 500, 9000] + [700] * 100:
        task = Task(delay, record)
        timer.add(task)
        refs.append(weakref.ref(task))
    del task
    gc.collect()
    assert all(ref() is not None for ref in refs) and len(timer) == 105
    assert refs[2]().cancel()
    moved = refs[3]()
    moved.delay_ms = 100
    timer.add(moved)
    del moved
    timer._check()
    assert timer.advance_clock(10_000)
    assert sorted(fired) == [5, 30, 100] + [700] * 100 + [9000]
    gc.collect()
    assert [i for i, ref in enumerate(refs) if ref() is not None] == []
    assert len(timer) == 0
    timer._check()


def test_the_worker_polls_what_came_due_while_it_ran_a_batch(
    timers, fake_clock, no_thread_leak
):
    """No reaper here and nobody calls advance_clock after the first batch:
    only the executor's worker, finishing a batch, can see that the next
    bucket came due meanwhile, and it polls it itself, in deadline order."""
    timer = timers.SystemTimer(name="w", clock=fake_clock, reaper=False)
    ran = []
    done = threading.Event()

    def first():
        ran.append(("first", timer.now_ms))
        fake_clock.advance_ms(25)  # the tasks due at +20 and +22 fall due

    try:
        start = timer.now_ms
        timer.schedule(10, first)
        timer.schedule(22, lambda: (ran.append(("third", timer.now_ms)), done.set()))
        timer.schedule(20, lambda: ran.append(("second", timer.now_ms)))
        fake_clock.advance_ms(10)
        assert timer.advance_clock(0)  # hands the first batch to the worker
        assert done.wait(10)
        assert [name for name, _ in ran] == ["first", "second", "third"]
        assert ran[0][1] == start + 10 and ran[1][1] == ran[2][1] == start + 35
        assert len(timer) == 0
    finally:
        timer.close()


def _recording(cls):
    """``cls`` whose polls record (thread name, whether a batch came back)."""

    class Recording(cls):
        def __init__(self, *args, **kwargs):
            self.polls = []
            super().__init__(*args, **kwargs)

        def _take_due(self, now_ms, step=False):  # every poll, whoever polls
            batch = super()._take_due(now_ms, step)
            self.polls.append((threading.current_thread().name, bool(batch)))
            return batch

    return Recording


def _until(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def test_the_idle_worker_keeps_time_not_the_reaper(timers, fake_clock, no_thread_leak):
    """Default executor: the idle worker sleeps until the bucket is due,
    polls it and runs it; the reaper, a backup, takes no part (handing each
    batch over from it would add a second thread wake-up to every task)."""
    timer = _recording(timers.SystemTimer)(name="k", clock=fake_clock)
    ran = []
    try:
        for ms in (10, 20, 30):
            timer.schedule(
                ms, lambda ms=ms: ran.append((ms, threading.current_thread().name))
            )
        for _ in range(3):
            fake_clock.advance_ms(10)
            timer._on_wake()  # the clock is fake: say that time moved
            assert _until(lambda: len(ran) == _ + 1)
        assert ran == [(10, "k-executor"), (20, "k-executor"), (30, "k-executor")]
        assert {name for name, got in timer.polls if got} == {"k-executor"}
        assert len(timer) == 0
    finally:
        timer.close()


def test_the_reaper_expires_what_a_busy_worker_left_due(
    timers, fake_clock, no_thread_leak
):
    """A long task keeps the worker busy: the reaper expires the buckets that
    have been due _BACKUP_NS (not sooner), the tasks stay counted until they
    run, and they run on the worker, in order, once it is free."""
    from tickwheel import timer as timer_mod

    backup_ms = timer_mod._BACKUP_NS // 1_000_000
    timer = _recording(timers.SystemTimer)(name="b", clock=fake_clock)
    release, started = threading.Event(), threading.Event()
    ran = []

    def block():
        started.set()
        release.wait(10)

    try:
        timer.schedule(10, block)
        timer.schedule(
            15, lambda: ran.append(("second", threading.current_thread().name))
        )
        timer.schedule(
            16, lambda: ran.append(("third", threading.current_thread().name))
        )
        fake_clock.advance_ms(10)
        timer._on_wake()
        assert started.wait(10)
        # Due, but not for long enough: the reaper leaves it to the worker.
        fake_clock.advance_ms(5 + backup_ms - 2)
        with timer._cond:
            timer._reaper_cond.notify()
        time.sleep(0.05)
        assert not [p for p in timer.polls if p[0] == "b-reaper" and p[1]]
        assert len(timer) == 2
        # Due for _BACKUP_NS: the reaper's own timed wait finds it.
        fake_clock.advance_ms(2)
        assert _until(lambda: ("b-reaper", True) in timer.polls)
        assert len(timer) == 2 and ran == []  # expired, queued, not yet run
        release.set()
        assert _until(lambda: len(ran) == 2)
        assert ran == [("second", "b-executor"), ("third", "b-executor")]
        assert len(timer) == 0
    finally:
        release.set()
        timer.close()


def test_close_cancels_batches_the_busy_worker_had_not_run(
    timers, fake_clock, no_thread_leak
):
    timer = timers.SystemTimer(name="c", clock=fake_clock)
    release, started = threading.Event(), threading.Event()

    def block():
        started.set()
        release.wait(10)

    closer = threading.Thread(target=timer.close, name="closer")
    try:
        timer.schedule(10, block)
        fake_clock.advance_ms(10)
        timer._on_wake()
        assert started.wait(10)
        later = [timer.schedule(5, lambda: None) for _ in range(3)]
        fake_clock.advance_ms(5)
        assert timer.advance_clock(0)  # polled, queued behind the blocked task
        assert len(timer) == 3
        closer.start()  # returns once the running task does
        assert _until(lambda: all(task.cancelled for task in later))
        assert len(timer) == 0 and closer.is_alive()
    finally:
        release.set()
        if closer.is_alive():
            closer.join()
        timer.close()


# -- advance_clock's return (Kafka: True when a due bucket was processed) -------


def test_system_advance_clock_true_after_a_cascade_only_poll(timers, fake_clock):
    """A due overflow bucket whose task only moves down a level still counts
    as processed (Kafka's advanceClock).  It used to return False."""
    timer = timers.SystemTimer(
        "t", 1, 3, reaper=False, executor="inline", clock=fake_clock
    )
    ran = []
    try:
        timer.schedule(10, ran.append, "x")  # level 2 (9 ms slots): slot 1008
        assert timer.next_expiration_ms == 1008
        fake_clock.advance_ms(8)
        assert timer.advance_clock(0) is True  # cascaded to level 0, not run
        assert ran == [] and timer.next_expiration_ms == 1010 and len(timer) == 1
        assert timer.advance_clock(0) is False  # nothing due at 1008
        fake_clock.advance_ms(2)
        assert timer.advance_clock(0) is True and ran == ["x"]
        timer._check()
    finally:
        timer.close()


class _WatchedLock:
    """A lock that records who started each acquire, and whether it blocks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started: list[tuple[str, bool]] = []

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.started.append((threading.current_thread().name, blocking))
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def test_the_idle_worker_never_waits_for_the_handover_holding_the_lock(
    timers, fake_clock, no_thread_leak
):
    """`_handover` is taken before the lock by every poller; the idle worker
    polls under the lock and only tries it there.  While another thread
    holds it (the reaper, polling), the worker waits for it with the lock
    let go: waiting with the lock held would deadlock against them."""
    timer = _recording(timers.SystemTimer)(name="h", clock=fake_clock)
    handover = timer._handover = _WatchedLock()
    ran = threading.Event()
    try:
        timer.schedule(10, ran.set)
        with handover:
            fake_clock.advance_ms(10)
            timer._on_wake()
            assert _until(lambda: ("h-executor", True) in handover.started)
            assert timer._cond.acquire(timeout=10)  # the worker let the lock go
            timer._cond.release()
            assert not ran.is_set()
        assert ran.wait(10)
        assert ("h-executor", True) in timer.polls
        assert len(timer) == 0
    finally:
        timer.close()


def test_system_advance_clock_true_after_the_worker_processed_a_bucket(
    timers, fake_clock, no_thread_leak
):
    """With the default executor the worker also polls (after a batch).  A due
    bucket it processed between two advance_clock calls still counts for the
    caller: True once, then False.  It returned False, so Kafka's drain loop
    stopped with the cascaded tasks pending (seen in CI, 3 of 200 runs)."""
    timer = timers.SystemTimer("t", 1, 3, reaper=False, clock=fake_clock)
    ran = threading.Event()
    try:
        timer.schedule(10, ran.set)  # level 2 (9 ms slots): slot 1008
        fake_clock.advance_ms(8)
        timer._expire_due()  # the worker's poll: cascade only, nothing runs
        assert timer.next_expiration_ms == 1010 and not ran.is_set()
        assert timer.advance_clock(0) is True  # processed since the last call
        assert timer.advance_clock(0) is False  # and only once
        fake_clock.advance_ms(2)
        assert timer.advance_clock(0) is True
        assert ran.wait(10)
    finally:
        timer.close()


class _ClockJumpingAfterARead:
    """A fake clock that moves to ``jump_ns`` just after its next reading:
    another thread moving a manual clock in the middle of a poll."""

    def __init__(self, ms: int) -> None:
        self.ns = ms * 1_000_000
        self.jump_ns: int | None = None

    def __call__(self) -> int:
        value = self.ns
        if self.jump_ns is not None:
            self.ns, self.jump_ns = self.jump_ns, None
        return value


def test_system_a_poll_counts_the_bucket_it_took_when_the_clock_moved(
    timers, no_thread_leak
):
    """A poll read the clock twice, once to count a due bucket and once to
    take what was due: a bucket falling due between the two readings was
    taken without being counted, and the caller's drain loop stopped with
    its cascaded tasks pending (Kafka's testTaskExpiration on a fake clock
    with the GIL off, about 1 run in 100).  One reading serves both now."""
    clock = _ClockJumpingAfterARead(1_000)
    timer = timers.SystemTimer("t", 1, 3, reaper=False, clock=clock)
    ran = threading.Event()
    try:
        timer.schedule(10, ran.set)  # level 2 (9 ms slots): slot 1008
        clock.ns, clock.jump_ns = 1_007_000_000, 1_008_000_000
        timer._expire_due()  # the worker's poll, with the clock moving under it
        assert timer.now_ms == 1008 and not ran.is_set()
        assert timer.advance_clock(0) is True  # slot 1008: due, or processed
        assert timer.next_expiration_ms == 1010
        assert timer.advance_clock(0) is False
        clock.ns = 1_010_000_000
        assert timer.advance_clock(0) is True
        assert ran.wait(10)
    finally:
        timer.close()


def test_system_kafka_drain_loop_runs_every_task(timers, fake_clock):
    """Kafka's drain loop, ``while advance_clock(...)``, with the wait for the
    next due bucket done by moving the fake clock there: every one of the 585
    tasks of TimerTest.testTaskExpiration runs.  It stopped at the first
    bucket that only cascaded, with most tasks never run."""
    timer = timers.SystemTimer(
        "t", 1, 3, reaper=False, executor="inline", clock=fake_clock
    )
    ran = []
    delays = [*range(5), *(d for d in range(10, 100) for _ in (0, 1))]
    delays += range(100, 500)
    try:
        for d in delays:
            timer.schedule(d, ran.append, d)

        def advance() -> bool:
            nxt = timer.next_expiration_ms
            if nxt is not None and nxt > timer.now_ms:
                fake_clock.ns = nxt * 1_000_000
            return bool(timer.advance_clock(0))

        while advance():
            pass
        assert len(delays) == 585
        assert sorted(ran) == sorted(delays) and len(timer) == 0
    finally:
        timer.close()


# -- pool executors: one submit per task ------------------------------------------


@pytest.mark.parametrize("n_tasks", [4, 8])
def test_system_pool_runs_one_buckets_blocking_tasks_concurrently(
    timers, fake_clock, no_thread_leak, n_tasks
):
    """Tasks due in the same millisecond, each waiting at a Barrier(4): they
    can only pass it if the pool runs four of them at once, on four threads.
    They used to run one after another on one pool thread (the barrier then
    breaks after its timeout).  Eight tasks meet four at a time, twice: the
    runners of a big bucket take its tasks in turn, not one runner all."""
    barrier = threading.Barrier(4, timeout=10)
    errors: list[BaseException] = []
    names: set[str] = set()
    done = threading.Semaphore(0)

    def meet() -> None:
        barrier.wait()
        names.add(threading.current_thread().name)
        done.release()

    with concurrent.futures.ThreadPoolExecutor(4, "pool") as pool:
        timer = timers.SystemTimer(
            reaper=False,
            executor=pool,
            clock=fake_clock,
            on_error=lambda task, exc: (errors.append(exc), done.release()),
        )
        try:
            tasks = [timer.schedule(5, meet) for _ in range(n_tasks)]
            fake_clock.advance_ms(5)
            assert timer.advance_clock(0) is True
            for _ in range(n_tasks):
                assert done.acquire(timeout=30)
        finally:
            timer.close()
    assert errors == []
    assert len(names) == 4 and all(n.startswith("pool") for n in names)
    assert all(task.done for task in tasks) and len(timer) == 0


def test_system_pool_runs_each_task_once_or_cancels_it(
    timers, fake_clock, no_thread_leak
):
    """Per-task submits with cancels racing them from another thread: every
    task either ran exactly once or was cancelled (and then never ran)."""
    import random

    rnd = random.Random(16)
    runs: collections.Counter[int] = collections.Counter()
    lock = threading.Lock()

    def hit(i: int) -> None:
        with lock:
            runs[i] += 1

    # The timer has no thread of its own (reaper=False, a pool); it is closed
    # only once the pool has run everything (close() cancels what is left).
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        timer = timers.SystemTimer(reaper=False, executor=pool, clock=fake_clock)
        tasks = [timer.schedule(rnd.randint(0, 60), hit, i) for i in range(3000)]
        victims = rnd.sample(tasks, 1000)
        cancelled: list[bool] = []
        # The first 100 cancels go before the clock moves (so some cancel
        # wins even when a loaded host starves this thread: it once lost
        # all 1,000 in CI on 3.13t), the other 900 race the clock.
        head_start = threading.Event()

        def cancel_victims() -> None:
            for n, t in enumerate(victims):
                cancelled.append(t.cancel())
                if n == 99:
                    head_start.set()

        canceller = threading.Thread(target=cancel_victims)
        canceller.start()
        assert head_start.wait(30)
        for _ in range(61):
            fake_clock.advance_ms(1)
            timer.advance_clock(0)
        canceller.join()
    timer.close()
    assert sum(cancelled) == sum(t.cancelled for t in tasks) > 0
    for i, task in enumerate(tasks):
        assert runs[i] == (0 if task.cancelled else 1), (i, task)
        assert task.cancelled or task.done
    assert len(timer) == 0


def test_system_pool_close_cancels_submitted_tasks_not_started(
    timers, fake_clock, no_thread_leak
):
    """Tasks submitted to a busy pool when the timer closes are cancelled
    when their turn comes, as documented for close()."""
    release = threading.Event()
    started = threading.Event()
    ran: list[int] = []

    def block() -> None:
        started.set()
        release.wait(30)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        timer = timers.SystemTimer(reaper=False, executor=pool, clock=fake_clock)
        first = timer.schedule(1, block)
        rest = [timer.schedule(1, ran.append, i) for i in range(3)]
        fake_clock.advance_ms(1)
        assert timer.advance_clock(0) is True
        assert started.wait(30)
        timer.close()
        release.set()
    assert first.done and ran == []
    assert all(task.cancelled for task in rest) and len(timer) == 0


@pytest.mark.parametrize(
    "threads, accepts, ran, refused",
    [
        (8, 2, [0, 1], 3),  # a submit per task: the ones not taken are cancelled
        (2, 1, [0, 1, 2, 3, 4], 0),  # runners: the one taken runs every task
        (2, 0, [], 5),  # no runner taken: all cancelled
    ],
)
def test_system_pool_refusing_mid_batch_cancels_and_logs_the_rest(
    timers, fake_clock, no_thread_leak, caplog, threads, accepts, ran, refused
):
    """An executor that shuts down half-way through a bucket: the tasks it
    took still run (with fewer pool threads than tasks, a runner it took runs
    them all); the others are cancelled and counted in the log."""

    class Refusing(concurrent.futures.ThreadPoolExecutor):
        accepted = 0

        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            if self.accepted == accepts:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self.accepted += 1
            return super().submit(fn, *args, **kwargs)

    got: list[int] = []
    with Refusing(threads) as pool:
        timer = timers.SystemTimer(reaper=False, executor=pool, clock=fake_clock)
        tasks = [timer.schedule(1, got.append, i) for i in range(5)]
        fake_clock.advance_ms(1)
        with caplog.at_level(logging.ERROR, logger="tickwheel"):
            assert timer.advance_clock(0) is True
    timer.close()
    assert sorted(got) == ran
    assert [t.done for t in tasks] == [i in ran for i in range(5)]
    assert sum(t.cancelled for t in tasks) == refused and len(timer) == 0
    assert (f"refused {refused} due task(s)" in caplog.text) == bool(refused)


@pytest.mark.parametrize("where", ["poll", "cascade"])
def test_an_error_in_the_idle_workers_step_is_logged_with_its_lock_let_go(
    timers, fake_clock, no_thread_leak, where
):
    """The worker logs an error in its poll, or in early cascading, with the
    timer's lock let go: a logging handler that adds a due task to the timer
    (which wakes the thread keeping time, under that lock) would otherwise
    deadlock the worker.  The handler adds from a helper thread and waits
    for it a while, so a lock kept fails this test instead of hanging it."""
    timer = timers.SystemTimer(name="log", clock=fake_clock)
    message = "error while expiring" if where == "poll" else "early cascade disabled"
    added = threading.Event()
    adds_done: list[bool] = []

    class Adding(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if message in record.getMessage():
                helper = threading.Thread(target=timer.schedule, args=(0, added.set))
                helper.start()
                helper.join(5)
                adds_done.append(not helper.is_alive())

    if where == "poll":
        take_due = timer._take_due
        failed = []

        def broken(now_ms):
            if not failed:
                failed.append(now_ms)
                raise MemoryError("simulated")
            return take_due(now_ms)

        timer._take_due = broken
    else:

        def broken(max_entries=256):
            raise MemoryError("simulated")

        timer.precascade = broken
    handler = Adding()
    log = logging.getLogger("tickwheel")
    log.addHandler(handler)
    try:
        done = threading.Event()
        timer.schedule(50, done.set)
        timer.schedule(0, lambda: None)  # the worker polls now, then idles
        assert added.wait(10)  # the handler's task ran: the worker went on
        assert adds_done == [True]  # and the add did not wait for the worker
        fake_clock.advance_ms(50)
        timer._on_wake()
        assert done.wait(10)
    finally:
        log.removeHandler(handler)
        timer.close()
