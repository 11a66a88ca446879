"""Apache Kafka's ``DelayedOperationTest``, ported test by test.

Sources: server-common ``org.apache.kafka.server.purgatory.DelayedOperationTest``
and, for the tests only the Scala suite had, core's
``kafka.server.DelayedOperationTest``.  The purgatory is built as Kafka's tests
build theirs: a mock timer with the expiration reaper disabled
(``DelayedOperationPurgatory("mock", MockTimer(), reaper=False)``), so expiry
runs on the manual clock.  API map: ``tryCompleteElseWatch`` is
``try_complete_else_watch``, ``checkAndComplete`` ``check_and_complete``,
``cancelForKey`` ``cancel_for_key``, ``numDelayed`` ``delayed``,
``isCompleted`` ``completed``.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest


def _kit(package: ModuleType) -> SimpleNamespace:
    """Kafka's test classes on one core (``tickwheel`` or its twin copy)."""
    base: Any = package.purgatory.DelayedOperation
    mock: Any = package.MockTimer

    class MockDelayedOperation(base):  # type: ignore[misc, valid-type]
        """Kafka's MockDelayedOperation: completes once ``completable``."""

        def __init__(
            self, delay_ms: int, lock: Any = None, response_lock: Any = None
        ) -> None:
            super().__init__(delay_ms, lock)
            self.completable = False
            self.response_lock = response_lock
            self.completed_event = threading.Event()

        def try_complete(self) -> bool:
            return self.completable and self.force_complete()

        def on_expiration(self) -> None:
            pass

        def on_complete(self) -> None:
            if self.response_lock is not None:
                if not self.response_lock.acquire(False):
                    raise RuntimeError(
                        "Response callback lock could not be acquired in callback"
                    )
            self.completed_event.set()  # Kafka: notify()

    return SimpleNamespace(
        Op=MockDelayedOperation,
        Base=base,
        MockTimer=mock,
        Purgatory=package.purgatory.DelayedOperationPurgatory,
    )


@pytest.fixture
def kit(timers: Any) -> SimpleNamespace:
    return _kit(timers.package)


@pytest.fixture
def purgatory(kit, no_thread_leak):
    p = kit.Purgatory("mock", kit.MockTimer(), reaper=False)
    yield p
    p._check()
    p.shutdown()


def test_DelayedOperationTest_testLockInTryCompleteElseWatch(kit, purgatory):
    held: list[bool] = []

    class Op(kit.Base):  # type: ignore[misc, name-defined]
        def try_complete(self) -> bool:
            held.append(self.lock.locked())  # single-threaded: held by us
            return False

    assert purgatory.try_complete_else_watch(Op(100_000), ["key"]) is False
    # Tried before and after watching, each time under the lock (tickwheel
    # has no safeTryComplete; the purgatory calls try_complete directly).
    assert held == [True, True]


@pytest.mark.skip(
    reason="tickwheel has no safeTryCompleteOrElse: try_complete_else_watch "
    "is the one public call that tries under the operation's lock; code that "
    "wants try-or-else takes op.lock and calls try_complete itself"
)
def test_DelayedOperationTest_testSafeTryCompleteOrElse():
    pass


def test_DelayedOperationTest_testRequestSatisfaction(kit, purgatory):
    r1, r2 = kit.Op(100_000), kit.Op(100_000)
    assert purgatory.check_and_complete("test1") == 0, "nothing waiting"
    assert purgatory.try_complete_else_watch(r1, ["test1"]) is False
    assert purgatory.check_and_complete("test1") == 0, "Still nothing satisfied"
    assert purgatory.try_complete_else_watch(r2, ["test2"]) is False
    assert purgatory.check_and_complete("test2") == 0, "Still nothing satisfied"
    r1.completable = True
    assert purgatory.check_and_complete("test1") == 1, "r1 satisfied"
    assert purgatory.check_and_complete("test1") == 0, "Nothing satisfied"
    r2.completable = True
    assert purgatory.check_and_complete("test2") == 1, "r2 satisfied"
    assert purgatory.check_and_complete("test2") == 0, "Nothing satisfied"


def test_DelayedOperationTest_testRequestExpiry(kit, purgatory):
    expiration = 20
    timer = purgatory.timer
    start = timer.now_ms
    r1, r2 = kit.Op(expiration), kit.Op(200_000)
    assert purgatory.try_complete_else_watch(r1, ["test1"]) is False
    assert purgatory.try_complete_else_watch(r2, ["test2"]) is False
    # r1.awaitExpiration(): the caller drives the mock timer.
    while not r1.completed_event.is_set():
        assert purgatory.advance_clock(1) is (timer.now_ms - start == expiration)
    elapsed = timer.now_ms - start
    assert r1.completed and r1.expired, "r1 completed due to expiration"
    assert not r2.completed, "r2 hasn't completed"
    assert elapsed >= expiration


@pytest.mark.slow
def test_DelayedOperationTest_testRequestExpiry_real_time(kit, no_thread_leak):
    """Kafka's original setup: the purgatory owns a real-time timer and reaper."""
    with kit.Purgatory("mock") as p:
        start = time.monotonic()
        r1, r2 = kit.Op(20), kit.Op(200_000)
        assert p.try_complete_else_watch(r1, ["test1"]) is False
        assert p.try_complete_else_watch(r2, ["test2"]) is False
        assert r1.completed_event.wait(10)
        elapsed_ms = (time.monotonic() - start) * 1000
        assert r1.completed and r1.expired and not r2.completed
        assert elapsed_ms >= 20  # never early


@pytest.mark.skip(
    reason="tickwheel has no DelayedFuturePurgatory: it is a JVM convenience "
    "over CompletableFuture; with concurrent.futures, a DelayedOperation "
    "whose try_complete checks the futures and whose keys are completed by "
    "their done-callbacks does the same"
)
def test_DelayedOperationTest_testDelayedFuture():
    pass


def test_DelayedOperationTest_testRequestPurge(kit, purgatory):
    r1, r2, r3 = kit.Op(100_000), kit.Op(100_000), kit.Op(100_000)
    purgatory.try_complete_else_watch(r1, ["test1"])
    purgatory.try_complete_else_watch(r2, ["test1", "test2"])
    purgatory.try_complete_else_watch(r3, ["test1", "test2", "test3"])
    assert purgatory.delayed == 3
    assert purgatory.watched == 6

    # complete the operations: they leave the timer at once
    r2.completable = True
    r2.try_complete()
    assert purgatory.delayed == 2
    r3.completable = True
    r3.try_complete()
    assert purgatory.delayed == 1

    # checking a watch should purge the watch list
    purgatory.check_and_complete("test1")
    assert purgatory.watched == 4
    purgatory.check_and_complete("test2")
    assert purgatory.watched == 2
    purgatory.check_and_complete("test3")
    assert purgatory.watched == 1


def test_DelayedOperationTest_shouldCancelForKeyReturningCancelledOperations(
    kit, purgatory
):
    purgatory.try_complete_else_watch(kit.Op(10_000), ["key"])
    purgatory.try_complete_else_watch(kit.Op(10_000), ["key"])
    purgatory.try_complete_else_watch(kit.Op(10_000), ["key2"])
    cancelled = purgatory.cancel_for_key("key")
    assert len(cancelled) == 2
    assert purgatory.delayed == 1
    assert purgatory.watched == 1


def test_DelayedOperationTest_shouldReturnNilOperationsOnCancelForKeyWhenKeyDoesntExist(
    purgatory,
):
    assert purgatory.cancel_for_key("key") == []


@pytest.mark.slow
def test_DelayedOperationTest_testTryCompleteWithMultipleThreads(kit, purgatory):
    """100 operations, 20 completion attempts each from a pool of 20 threads,
    try_complete sleeping a random 0-9 ms: every operation completes, though
    the thread that makes one completable may find its lock taken."""
    rnd = random.Random(8334)
    max_delay_ms, attempts = 10, 20

    class TestDelayOperation(kit.Op):  # type: ignore[misc, name-defined]
        def __init__(self, index: int) -> None:
            super().__init__(10_000)
            self.key = f"key{index}"
            self.remaining = attempts
            self.remaining_lock = threading.Lock()

        def try_complete(self) -> bool:
            should_complete = self.completable
            time.sleep(rnd.randrange(max_delay_ms) / 1000)
            return should_complete and self.force_complete()

    ops = []
    for index in range(100):
        op = TestDelayOperation(index)
        purgatory.try_complete_else_watch(op, [op.key])
        ops.append(op)

    def attempt(op: TestDelayOperation, delay_ms: int) -> None:
        time.sleep(delay_ms / 1000)  # executor.schedule(..., delayMs)
        with op.remaining_lock:
            op.remaining -= 1
            last = op.remaining == 0
        if last:
            op.completable = True
        purgatory.check_and_complete(op.key)

    with ThreadPoolExecutor(20) as executor:
        futures = [
            executor.submit(attempt, op, rnd.randrange(max_delay_ms))
            for _ in range(attempts)
            for op in ops
        ]
        for future in futures:
            future.result()
    for op in ops:
        assert op.completed, f"Operation {op.key} should have completed"


def _verify_delayed_operation_lock(
    purgatory: Any, make_op: Any, reentrant: bool
) -> None:
    """Kafka's verifyDelayedOperationLock, the steps that map (see the skip below)."""
    key = "key"

    def create_delayed_operations(count: int) -> list[Any]:
        ops = []
        for _ in range(count):
            op = make_op()
            purgatory.try_complete_else_watch(op, [key])
            assert not op.completed, "Not completable"
            ops.append(op)
        return ops

    def check_and_complete(completable: list[Any], expected: list[Any]) -> None:
        for op in completable:
            op.completable = True
        assert purgatory.check_and_complete(key) == len(expected)
        for op in expected:
            assert op.completed, "Should have completed"
        for op in set(completable) - set(expected):
            assert not op.completed, "Should not have completed"

    # If locks are free all completable operations should complete
    ops = create_delayed_operations(2)
    check_and_complete(ops, ops)

    # Lock held by current thread, completable operations should complete
    # (Kafka's locks are ReentrantLocks; tickwheel's default private lock is
    # not reentrant, so this step needs a lock=RLock operation.)
    if reentrant:
        ops = create_delayed_operations(2)
        with ops[1].lock:
            check_and_complete(ops, ops)

    # Immediately completable operations should complete without locking
    for _ in range(2):
        op = make_op()
        op.completable = True
        assert purgatory.try_complete_else_watch(op, [key]) is True
        assert op.completed


def test_DelayedOperationTest_testDelayedOperationLock(kit, purgatory):
    _verify_delayed_operation_lock(purgatory, lambda: kit.Op(100_000), False)


def test_DelayedOperationTest_testDelayedOperationLockOverride(kit, purgatory):
    def new_mock_operation() -> Any:
        lock = threading.RLock()
        return kit.Op(100_000, lock, lock)

    _verify_delayed_operation_lock(purgatory, new_mock_operation, True)


@pytest.mark.skip(
    reason="deliberate difference: an operation's lock once handed out by "
    "DelayedOperation.lock (or passed in) may be held by code that never "
    "looks at the retry flag, so check_and_complete waits for it instead of "
    "leaving a retry to its holder; Kafka's 'lock held by another thread, "
    "should not block' steps would block.  Contention among purgatory paths "
    "on a private lock does not block (tests/test_purgatory.py)"
)
def test_DelayedOperationTest_testDelayedOperationLock_heldByAnotherThread():
    pass
