"""The compiled purgatory's lock (``_purgatory._Lock``) behaves as threading.Lock.

Operations (private lock) and shards use it so that the hot paths take and
release it in C; whoever is handed ``DelayedOperation.lock`` must be able to
use it exactly like a ``threading.Lock``.  Every test runs on both locks.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.c_extension


def _locks() -> list[Any]:
    from tickwheel import _purgatory

    return [
        pytest.param(threading.Lock, id="threading.Lock"),
        pytest.param(_purgatory._Lock, id="_purgatory._Lock"),
    ]


@pytest.fixture(params=_locks())
def make(request: pytest.FixtureRequest) -> Callable[[], Any]:
    return request.param  # type: ignore[no-any-return]


def test_acquire_release_locked(make):
    lock = make()
    assert not lock.locked()
    assert lock.acquire() is True
    assert lock.locked()
    assert lock.acquire(False) is False
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(timeout=0) is False
    lock.release()
    assert not lock.locked()
    assert lock.acquire(False) is True
    lock.release()


def test_release_unlocked_raises(make):
    lock = make()
    with pytest.raises(RuntimeError):
        lock.release()
    assert not lock.locked()


@pytest.mark.parametrize(
    "kwargs", [{"blocking": False, "timeout": 1}, {"timeout": -2}, {"timeout": -0.5}]
)
def test_bad_arguments_raise_value_error(make, kwargs):
    lock = make()
    with pytest.raises(ValueError):
        lock.acquire(**kwargs)
    assert not lock.locked()


def test_context_manager(make):
    lock = make()
    with lock:
        assert lock.locked()
    assert not lock.locked()
    with pytest.raises(KeyError), lock:
        raise KeyError("inside")
    assert not lock.locked()


def test_timed_acquire_gives_up_while_held(make):
    lock = make()
    lock.acquire()
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(lock.acquire(timeout=0.02)))
    t.start()
    t.join(10)
    assert got == [False]
    lock.release()


def test_a_waiting_thread_gets_it_after_release_from_another_thread(make):
    lock = make()
    lock.acquire()
    waiting, got = threading.Event(), threading.Event()

    def wait() -> None:
        waiting.set()
        if lock.acquire():
            got.set()

    t = threading.Thread(target=wait)
    t.start()
    assert waiting.wait(10)
    assert not got.wait(0.05)  # still held
    # A Lock (unlike an RLock) may be released by any thread.
    releaser = threading.Thread(target=lock.release)
    releaser.start()
    releaser.join(10)
    assert got.wait(10)
    t.join(10)
    assert lock.locked()
    lock.release()


@pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(signal, "setitimer"), reason="setitimer"
)
def test_a_signal_handler_that_raises_interrupts_a_blocking_acquire(make):
    class Interrupted(Exception):
        pass

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted()

    lock = make()
    lock.acquire()
    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Interrupted):
            lock.acquire()  # held by this very thread: only the signal ends it
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert lock.locked()
    # The interrupted wait left nothing behind.
    _assert_the_next_release_wakes_a_waiter(lock)
    lock.release()


def test_mutual_exclusion_under_contention(make):
    """Threads that keep switching inside the critical section never overlap
    and lose no update (the compiled lock's uncontended path is a flag under
    the GIL; contended ones wait on a system lock)."""
    import time

    lock = make()
    state = {"count": 0, "inside": 0, "overlaps": 0}
    threads, rounds = 6, 400

    def work() -> None:
        for i in range(rounds):
            with lock:
                state["inside"] += 1
                if state["inside"] > 1:
                    state["overlaps"] += 1
                count = state["count"]
                if i % 8 == 0:
                    time.sleep(0)  # give the GIL away while holding the lock
                state["count"] = count + 1
                state["inside"] -= 1

    pool = [
        threading.Thread(target=work, name=f"test-lock-{k}") for k in range(threads)
    ]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    assert not any(t.is_alive() for t in pool)
    assert state == {"count": threads * rounds, "inside": 0, "overlaps": 0}
    assert not lock.locked()


def test_every_waiter_gets_it_in_turn(make):
    lock = make()
    lock.acquire()
    got: list[int] = []
    started = threading.Barrier(6)

    def wait(k: int) -> None:
        started.wait(10)
        with lock:
            got.append(k)

    pool = [threading.Thread(target=wait, args=(k,)) for k in range(5)]
    for t in pool:
        t.start()
    started.wait(10)
    lock.release()
    for t in pool:
        t.join(20)
    assert sorted(got) == [0, 1, 2, 3, 4] and not lock.locked()


def _in_thread(fn: Callable[[], Any]) -> list[Any]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(10)
    return out


def _assert_the_next_release_wakes_a_waiter(lock: Any) -> None:
    """``lock`` is held by this thread: a waiter in another thread must stay
    blocked until this thread releases it, then get it (and hold it)."""
    waiting, got = threading.Event(), threading.Event()

    def wait() -> None:
        waiting.set()
        if lock.acquire(timeout=20):
            got.set()

    t = threading.Thread(target=wait)
    t.start()
    assert waiting.wait(10) and not got.wait(0.05)
    lock.release()
    assert got.wait(10)
    t.join(10)
    assert lock.locked()


def test_a_waiter_that_gave_up_leaves_the_lock_usable(make):
    # A timed-out waiter may leave a wake-up behind (or none): the next
    # waiter must still be woken by the next release, and not before it.
    lock = make()
    lock.acquire()
    assert _in_thread(lambda: lock.acquire(timeout=0.02)) == [False]
    _assert_the_next_release_wakes_a_waiter(lock)
    lock.release()
    assert lock.acquire(False) and lock.locked()
    lock.release()


def test_operations_and_shards_use_it_and_hand_it_out_usable():
    from tickwheel import MockTimer, _purgatory
    from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

    class Op(DelayedOperation):
        __slots__ = ()

        def try_complete(self) -> bool:
            return False

    op = Op(10)
    assert type(op._op_lock) is _purgatory._Lock
    purgatory = DelayedOperationPurgatory("lock", MockTimer())
    assert all(type(shard.lock) is _purgatory._Lock for shard in purgatory._shards)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    lock = op.lock  # handed out: from now on the purgatory waits for it
    done = threading.Event()

    def complete_elsewhere() -> None:
        op.force_complete()  # blocks until the lock is released below
        done.set()

    with lock:
        t = threading.Thread(target=complete_elsewhere)
        t.start()
        assert not done.wait(0.05)
    assert done.wait(10)
    t.join(10)
    assert op.completed and not lock.locked()
    purgatory.shutdown()


def test_a_private_lock_held_in_a_hook_is_waited_for_by_another_thread():
    """The lock taken around try_complete (on a GIL build, a flag in the
    operation until someone needs it as an object) makes another thread's
    force_complete wait while a hook runs without the GIL; the lock read as
    an object meanwhile is held; afterwards the operation completed once."""
    from tickwheel import MockTimer
    from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

    inside, leave = threading.Event(), threading.Event()
    completions = []

    class Op(DelayedOperation):
        __slots__ = ()

        def try_complete(self) -> bool:
            inside.set()
            assert leave.wait(10)  # releases the GIL, holding the op's lock
            return False

        def on_complete(self) -> None:
            completions.append(self)

    purgatory = DelayedOperationPurgatory("lazy", MockTimer())
    op = Op(10)
    watcher = threading.Thread(
        target=purgatory.try_complete_else_watch, args=(op, ["k"])
    )
    watcher.start()
    assert inside.wait(10)
    results: list[bool] = []
    other = threading.Thread(target=lambda: results.append(op.force_complete()))
    other.start()
    other.join(0.1)
    assert other.is_alive() and not results  # waits for the holder
    assert op._op_lock.locked()  # the object, made while held, is held
    leave.set()
    watcher.join(10)
    other.join(10)
    assert not watcher.is_alive() and not other.is_alive()
    assert results == [True] and completions == [op]
    lock = op._op_lock
    assert not lock.locked() and lock.acquire(False)
    lock.release()
    purgatory.shutdown()
