"""Apache Kafka's timer tests, ported test by test (server-common
``org.apache.kafka.server.util.timer``: ``TimerTaskListTest``, ``TimingWheelTest``,
``TimerTest``, ``SystemTimerReaperTest``).

Each test runs on both cores (the ``impl``/``timers`` fixtures).  Kafka's API
maps to tickwheel's as follows: ``new TimerTaskEntry(task, ms)`` is the task
itself with ``expiration_ms`` set (a tickwheel task is its own list node);
``list.foreach`` is ``list.entries()``; ``AtomicInteger`` counters are
``TaskCounter``; Kafka's ``SystemTimer`` (driven by ``advanceClock``) is
``SystemTimer(..., reaper=False)``, and ``SystemTimerReaper`` is the reaper
thread every ``SystemTimer`` starts by default.
"""

from __future__ import annotations

import concurrent.futures
import threading
from types import ModuleType
from typing import Any

import pytest


def _test_task(impl: ModuleType) -> Any:
    class TestTask(impl.TimerTask):  # type: ignore[misc, name-defined]
        """Kafka's ``TestTask``: a task whose run() does nothing."""

        def run(self) -> None:
            pass

    return TestTask


# -- TimerTaskListTest ---------------------------------------------------------


def test_TimerTaskListTest_testAll(impl):
    TestTask = _test_task(impl)
    shared = impl.TaskCounter()
    list1, list2, list3 = (impl.TimerTaskList(shared) for _ in range(3))

    def size(bucket: Any) -> int:
        return len(bucket.entries())

    tasks = []
    for i in range(1, 11):
        task = TestTask(0)
        task.expiration_ms = 10
        list1.add(task)
        assert shared.value == i
        tasks.append(task)
    assert shared.value == len(tasks)

    # reinserting the existing tasks shouldn't change the task count
    for task in tasks[:4]:
        prev = shared.value
        list2.add(task)  # moves the node out of list1
        assert shared.value == prev
    assert size(list1) == 10 - 4
    assert size(list2) == 4
    assert shared.value == len(tasks)

    for task in tasks[4:]:
        prev = shared.value
        list3.add(task)
        assert shared.value == prev
    assert (size(list1), size(list2), size(list3)) == (0, 4, 6)
    assert shared.value == len(tasks)

    # cancel tasks in lists
    for task in list1.entries():
        task.cancel()
    assert (size(list1), size(list2), size(list3)) == (0, 4, 6)

    for task in list2.entries():
        assert task.cancel() is True
    assert (size(list1), size(list2), size(list3)) == (0, 0, 6)

    for task in list3.entries():
        assert task.cancel() is True
    assert (size(list1), size(list2), size(list3)) == (0, 0, 0)
    assert shared.value == 0
    for bucket in (list1, list2, list3):
        bucket._check()


@pytest.mark.skip(
    reason="tickwheel buckets have no clock: TimerTaskList holds only its slot "
    "(expiration_ms) and the timer computes delays (next_expiration_ms - now), "
    "so there is no getDelay to port"
)
def test_TimerTaskListTest_testGetDelay():
    pass


# -- TimingWheelTest -----------------------------------------------------------

START_MS, TICK_MS, WHEEL_SIZE = 1000, 10, 5


@pytest.fixture
def wheel_kit(impl):
    counter = impl.TaskCounter()
    queue = impl.DelayQueue()
    wheel = impl.TimingWheel(TICK_MS, WHEEL_SIZE, START_MS, counter, queue)
    return impl, wheel, counter, queue


def _entry(impl: ModuleType, delay_ms: int, expiration_ms: int) -> Any:
    task = _test_task(impl)(delay_ms)
    task.expiration_ms = expiration_ms
    return task


def test_TimingWheelTest_testAddValidTask(wheel_kit):
    impl, wheel, counter, queue = wheel_kit
    entry = _entry(impl, TICK_MS * 2, START_MS + TICK_MS * 2)
    assert wheel.add(entry) is True, "Should successfully add valid task"
    assert len(queue) > 0
    assert counter.value == 1
    wheel._check()


def test_TimingWheelTest_testAddExpiredTask(wheel_kit):
    impl, wheel, counter, queue = wheel_kit
    entry = _entry(impl, -1, START_MS - 1)
    assert wheel.add(entry) is False, "Expired task should not be added"
    assert counter.value == 0 and len(queue) == 0


@pytest.mark.skip(
    reason="tickwheel's TimerTask is its own entry: cancel() before it is added "
    "is a no-op that returns False (documented), so there is no cancelled "
    "entry for TimingWheel.add to refuse; a timer refuses to re-add a "
    "cancelled callable task (RuntimeError)"
)
def test_TimingWheelTest_testAddCancelledTask():
    pass


def test_TimingWheelTest_testAddTaskInCurrentBucket(wheel_kit):
    impl, wheel, counter, queue = wheel_kit
    entry = _entry(impl, 5, START_MS + 5)
    assert wheel.add(entry) is False, "Task within current tick should expire now"


def test_TimingWheelTest_testAdvanceClockWithinTick(wheel_kit):
    _, wheel, _, _ = wheel_kit
    wheel.advance_clock(START_MS + 5)
    assert wheel.current_time_ms == START_MS


def test_TimingWheelTest_testAdvanceClockToNextTick(wheel_kit):
    _, wheel, _, _ = wheel_kit
    wheel.advance_clock(START_MS + TICK_MS)
    assert wheel.current_time_ms == START_MS + TICK_MS


def test_TimingWheelTest_testOverflowWheelCreation(wheel_kit):
    impl, wheel, _, _ = wheel_kit
    assert wheel.overflow_wheel is None
    interval = TICK_MS * WHEEL_SIZE
    overflow_time = START_MS + interval + TICK_MS
    assert wheel.add(_entry(impl, interval + TICK_MS, overflow_time)) is True
    existing = wheel.overflow_wheel
    assert existing is not None, "Overflow wheel should be created"
    assert wheel.add(_entry(impl, interval + TICK_MS + 1, overflow_time + 1)) is True
    assert wheel.overflow_wheel is existing
    wheel._check()


def test_TimingWheelTest_testAdvanceClockWithOverflowWheel(wheel_kit):
    impl, wheel, _, _ = wheel_kit
    interval = TICK_MS * WHEEL_SIZE
    wheel.add(_entry(impl, interval + TICK_MS, START_MS + interval + TICK_MS))
    assert wheel.overflow_wheel is not None
    advance_time = START_MS + TICK_MS * WHEEL_SIZE + 10  # 1060
    wheel.advance_clock(advance_time)
    assert wheel.current_time_ms == advance_time
    assert wheel.overflow_wheel.current_time_ms == START_MS + TICK_MS * WHEEL_SIZE


# -- TimerTest -----------------------------------------------------------------


def _timer_test_task(impl: ModuleType) -> Any:
    class TestTask(impl.TimerTask):  # type: ignore[misc, name-defined]
        """Kafka's TimerTest.TestTask: records its id once, counts a latch down."""

        def __init__(
            self, delay_ms: int, id_: int, latch: Latch, output: list[int]
        ) -> None:
            super().__init__(delay_ms)
            self.id = id_
            self.latch = latch
            self.output = output
            self.completed = False

        def run(self) -> None:
            if not self.completed:
                self.completed = True
                self.output.append(self.id)  # list.append is atomic
                self.latch.count_down()

    return TestTask


class Latch:
    """java.util.concurrent.CountDownLatch, the part the tests use."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._cond = threading.Condition()

    def count_down(self) -> None:
        with self._cond:
            self._count -= 1
            if self._count <= 0:
                self._cond.notify_all()

    def wait(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._count <= 0, timeout)


@pytest.fixture
def kafka_timer(timers, fake_clock, no_thread_leak):
    """Kafka's setup: ``new SystemTimer("test", 1, 3, hiResClockMs())``, no reaper."""
    timer = timers.SystemTimer("test", 1, 3, reaper=False, clock=fake_clock)
    yield timer
    timer.close()
    # Kafka's teardown: the executor must be terminated.
    assert not any(t.is_alive() for t in timer.threads)


def test_TimerTest_testAlreadyExpiredTask(timers, kafka_timer):
    output: list[int] = []
    TestTask = _timer_test_task(timers.core)
    latches = []
    for i in range(-5, 0):
        latch = Latch(1)
        kafka_timer.add(TestTask(i, i, latch, output))
        latches.append(latch)
    kafka_timer.advance_clock(0)
    for latch in latches:
        assert latch.wait(10), "already expired tasks should run immediately"
    assert set(output) == {-5, -4, -3, -2, -1}


def _expiration_tasks(TestTask: Any, output: list[int]) -> tuple[list, list, list]:
    tasks, ids, latches = [], [], []
    for i in range(5):
        latch = Latch(1)
        tasks.append(TestTask(i, i, latch, output))
        ids.append(i)
        latches.append(latch)
    for i in range(10, 100):
        latch = Latch(2)
        tasks += [TestTask(i, i, latch, output), TestTask(i, i, latch, output)]
        ids += [i, i]
        latches.append(latch)
    for i in range(100, 500):
        latch = Latch(1)
        tasks.append(TestTask(i, i, latch, output))
        ids.append(i)
        latches.append(latch)
    return tasks, ids, latches


@pytest.mark.slow
def test_TimerTest_testTaskExpiration(timers, no_thread_leak):
    """Verbatim, in real time: Kafka's drain loop ``while advanceClock(2000)``
    must run all 585 tasks (it used to stop after the first bucket that only
    cascaded).  The last call waits out its 2 s with nothing left."""
    timer = timers.SystemTimer("test", 1, 3, reaper=False)
    output: list[int] = []
    try:
        tasks, ids, latches = _expiration_tasks(_timer_test_task(timers.core), output)
        for task in tasks:
            timer.add(task)
        while timer.advance_clock(2000):
            pass
        for latch in latches:
            assert latch.wait(10)
        assert sorted(output) == ids, "output should match"
    finally:
        timer.close()


def test_TimerTest_testTaskExpiration_fake_clock(timers, kafka_timer, fake_clock):
    """The same on the fake clock: advanceClock's wait for the next due bucket
    is the clock jumping there."""
    output: list[int] = []
    tasks, ids, latches = _expiration_tasks(_timer_test_task(timers.core), output)
    for task in tasks:
        kafka_timer.add(task)

    def advance_clock() -> bool:
        nxt = kafka_timer.next_expiration_ms
        if nxt is not None and nxt > kafka_timer.now_ms:
            fake_clock.ns = nxt * 1_000_000
        return bool(kafka_timer.advance_clock(0))

    while advance_clock():
        pass
    for latch in latches:
        assert latch.wait(10)
    assert sorted(output) == ids, "output should match"


# -- SystemTimerReaperTest -----------------------------------------------------


class _KafkaTimeoutError(Exception):
    """org.apache.kafka.common.errors.TimeoutException."""


def _future_task(impl: ModuleType) -> Any:
    class FutureTimerTask(impl.TimerTask):  # type: ignore[misc, name-defined]
        def __init__(self, delay_ms: int) -> None:
            super().__init__(delay_ms)
            self.future: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run(self) -> None:
            self.future.set_exception(
                _KafkaTimeoutError(
                    "Future failed to be completed before timeout of "
                    f"{self.delay_ms}Ms ms was reached"
                )
            )

    return FutureTimerTask


def _add(timer: Any, impl: ModuleType, delay_ms: int) -> Any:
    task = _future_task(impl)(delay_ms)
    timer.add(task)
    return task.future


@pytest.mark.slow
def test_SystemTimerReaperTest_testReaper(timers, no_thread_leak):
    with timers.SystemTimer("reaper") as timer:
        futures = [_add(timer, timers.core, ms) for ms in (100, 200, 300)]
        for future in futures:
            assert isinstance(future.exception(timeout=10), _KafkaTimeoutError)


def test_SystemTimerReaperTest_testReaperClose(timers, no_thread_leak):
    timer = timers.SystemTimer("reaper")
    reaper = [t for t in timer.threads if t.name == "reaper-reaper"]
    assert len(reaper) == 1 and reaper[0].is_alive()
    timer.close()
    assert timer.closed
    assert not reaper[0].is_alive(), "reaper not shutdown"


@pytest.mark.slow
def test_SystemTimerReaperTest_testSharedTimerBetweenConsumers(timers, no_thread_leak):
    with timers.SystemTimer("shared-reaper") as timer:
        consumer1 = _add(timer, timers.core, 100)
        consumer2 = _add(timer, timers.core, 200)
        assert isinstance(consumer1.exception(timeout=10), _KafkaTimeoutError)
        assert isinstance(consumer2.exception(timeout=10), _KafkaTimeoutError)
        late = _add(timer, timers.core, 100)
        assert isinstance(late.exception(timeout=10), _KafkaTimeoutError)


def test_SystemTimerReaperTest_testRejectsNullName(timers, no_thread_leak):
    with pytest.raises(TypeError, match="name must be a non-empty str, got None"):
        timers.SystemTimer(None)


@pytest.mark.skip(
    reason="the reaper is part of SystemTimer (reaper=True), not an object "
    "wrapping a timer, so there is no timer argument to pass None to"
)
def test_SystemTimerReaperTest_testRejectsNullTimer():
    pass
