"""DelayedOperation / DelayedOperationPurgatory on both cores.

Adapted from Kafka's DelayedOperationTest: satisfaction, expiry, purge,
cancel_for_key, the lock contract and a many-threads completion race, plus
the same race replayed deterministically on a MockTimer, a Hypothesis model
test against a dict reference, and bad input.
"""

from __future__ import annotations

import itertools
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tickwheel.purgatory import DelayedOperationPurgatory


def held(lock: Any) -> bool:
    """True iff ``lock`` is held (by this thread, for an RLock)."""
    if hasattr(lock, "_is_owned"):
        return bool(lock._is_owned())
    return bool(lock.locked())


def _default_kit() -> SimpleNamespace:
    """The kit of the core ``tickwheel`` itself uses (what timer=None builds on)."""
    import tickwheel

    return _kit(tickwheel)


def _kit(package: ModuleType) -> SimpleNamespace:
    """The DelayedOperation base, timers and purgatory of one core's package.

    ``package`` is ``tickwheel`` or, for the other core in a compiled run,
    its twin copy (the ``timers`` fixture's ``package``).
    """
    base: Any = package.purgatory.DelayedOperation
    mock: Any = package.MockTimer
    system: Any = package.SystemTimer

    class MockOp(base):  # type: ignore[misc, valid-type]
        """Completes once ``completable`` is set; counts its callbacks."""

        def __init__(self, delay_ms: float, lock: Any = None) -> None:
            super().__init__(delay_ms, lock)
            self.completable = False
            self.complete_calls = 0
            self.expire_calls = 0
            self.lock_held_in_try: list[bool] = []
            self.lock_held_in_complete: bool | None = None

        def try_complete(self) -> bool:
            self.lock_held_in_try.append(held(self.lock))
            return self.completable and self.force_complete()

        def on_complete(self) -> None:
            self.complete_calls += 1
            self.lock_held_in_complete = held(self.lock)

        def on_expiration(self) -> None:
            self.expire_calls += 1

    return SimpleNamespace(
        Op=MockOp,
        Base=base,
        MockTimer=mock,
        SystemTimer=system,
        Purgatory=package.purgatory.DelayedOperationPurgatory,
    )


@pytest.fixture
def kit(timers: Any) -> SimpleNamespace:
    return _kit(timers.package)


@pytest.fixture
def mock_purgatory(kit: SimpleNamespace):
    p = kit.Purgatory("mock", kit.MockTimer())
    yield p
    p._check()
    p.shutdown()


# -- satisfaction, expiry, purge, cancel ---------------------------------------
def test_purgatory_request_satisfaction(kit, mock_purgatory):
    p = mock_purgatory
    r1, r2 = kit.Op(100_000), kit.Op(100_000)
    assert p.check_and_complete("test1") == 0  # unknown key
    assert p.try_complete_else_watch(r1, ["test1"]) is False
    assert p.try_complete_else_watch(r2, ["test2"]) is False
    assert p.check_and_complete("test1") == 0
    assert p.check_and_complete("test2") == 0
    assert (r1.complete_calls, r2.complete_calls) == (0, 0)
    r1.completable = True
    assert p.check_and_complete("test1") == 1
    assert p.check_and_complete("test2") == 0
    assert (r1.completed, r2.completed) == (True, False)
    r2.completable = True
    assert p.check_and_complete("test2") == 1
    assert p.check_and_complete("test1") == 0 and p.check_and_complete("test2") == 0
    assert (r1.complete_calls, r2.complete_calls) == (1, 1)
    assert (r1.expire_calls, r2.expire_calls) == (0, 0)
    assert (p.delayed, p.watched, p.keys()) == (0, 0, [])


def test_purgatory_completes_at_once_without_watching(kit, mock_purgatory):
    op = kit.Op(100)
    op.completable = True
    assert mock_purgatory.try_complete_else_watch(op, ["k"]) is True
    assert op.completed and op.complete_calls == 1
    assert (mock_purgatory.watched, mock_purgatory.delayed) == (0, 0)


def test_purgatory_request_expiry(kit, mock_purgatory):
    p = mock_purgatory
    timer = p.timer
    r1, r2 = kit.Op(20), kit.Op(200_000)
    assert p.try_complete_else_watch(r1, ["test1"]) is False
    assert p.try_complete_else_watch(r2, ["test2"]) is False
    assert p.delayed == 2
    timer.advance_clock(19)
    assert not r1.completed
    timer.advance_clock(1)
    assert (
        r1.completed and r1.expired and (r1.complete_calls, r1.expire_calls) == (1, 1)
    )
    assert not r2.completed and not r2.expired
    assert p.delayed == 1
    # The expired op's entry is stale; a check drops it without completing again.
    r1.completable = True
    assert p.check_and_complete("test1") == 0
    assert r1.complete_calls == 1 and p.watched == 1


def test_purgatory_expired_op_is_not_completed_by_check(kit, mock_purgatory):
    op = kit.Op(5)
    mock_purgatory.try_complete_else_watch(op, ["k"])
    mock_purgatory.timer.advance_clock(5)
    op.completable = True
    assert op.force_complete() is False
    assert (op.complete_calls, op.expire_calls) == (1, 1)


def test_purgatory_force_complete_cancels_timer_entry(kit, mock_purgatory):
    op = kit.Op(50)
    mock_purgatory.try_complete_else_watch(op, ["k"])
    assert op.pending and mock_purgatory.delayed == 1
    assert op.force_complete() is True
    assert op.force_complete() is False
    assert not op.pending and mock_purgatory.delayed == 0
    assert mock_purgatory.timer.advance_clock(100) is False
    assert (op.complete_calls, op.expire_calls, op.expired) == (1, 0, False)


def test_purgatory_purge(kit):
    p = kit.Purgatory("mock", kit.MockTimer())
    r1, r2, r3 = kit.Op(100_000), kit.Op(100_000), kit.Op(100_000)
    p.try_complete_else_watch(r1, ["test1"])
    p.try_complete_else_watch(r2, ["test1", "test2"])
    p.try_complete_else_watch(r3, ["test1", "test2", "test3"])
    assert (p.delayed, p.watched) == (3, 6)
    r2.completable = True
    assert r2.force_complete()
    assert (p.delayed, p.watched) == (2, 6)
    r3.completable = True
    assert r3.force_complete()
    assert (p.delayed, p.watched) == (1, 6)
    assert p.check_and_complete("test1") == 0
    assert (p.delayed, p.watched) == (1, 4)
    assert p.check_and_complete("test2") == 0
    assert (p.delayed, p.watched) == (1, 2)
    assert p.check_and_complete("test3") == 0
    assert (p.delayed, p.watched) == (1, 1)
    assert p.keys() == ["test1"]
    p._check()


def test_purgatory_purge_runs_when_estimate_exceeds_interval(kit):
    p = kit.Purgatory("mock", kit.MockTimer(), purge_interval=3)
    ops = [kit.Op(100_000) for _ in range(4)]
    for op in ops:
        p.try_complete_else_watch(op, ["a", "b"])
    for op in ops:
        op.force_complete()
    assert p.watched == 8  # completed, still watched: estimate 4 - delayed 0 > 3
    fresh = kit.Op(100_000)
    p.try_complete_else_watch(fresh, ["a"])
    assert p.watched == 1 and p.keys() == ["a"]
    # Below the interval nothing is swept.
    fresh.force_complete()
    other = kit.Op(100_000)
    p.try_complete_else_watch(other, ["c"])
    assert p.watched == 2
    assert p.purge() == 1 and p.watched == 1
    p._check()


def test_purgatory_cancel_for_key(kit, mock_purgatory):
    p = mock_purgatory
    r1, r2, r3 = kit.Op(1000), kit.Op(1000), kit.Op(1000)
    p.try_complete_else_watch(r1, ["key1"])
    p.try_complete_else_watch(r2, ["key1", "key2"])
    p.try_complete_else_watch(r3, ["key2"])
    assert p.cancel_for_key("unknown") == []
    cancelled = p.cancel_for_key("key1")
    assert cancelled == [r1, r2]
    assert all(op.withdrawn and not op.completed and op.cancelled for op in cancelled)
    assert p.delayed == 1 and "key1" not in p.keys()
    # r2's entry under key2 is stale: an event on key2 completes only r3.
    r2.completable = r3.completable = True
    assert p.check_and_complete("key2") == 1
    assert (r1.complete_calls, r2.complete_calls, r3.complete_calls) == (0, 0, 1)
    p.timer.advance_clock(2000)
    assert (r1.expire_calls, r2.expire_calls) == (0, 0)
    assert p.cancel_for_key("key1") == []


def test_purgatory_duplicate_keys_watched_once(kit, mock_purgatory):
    op = kit.Op(1000)
    mock_purgatory.try_complete_else_watch(op, ("k", "k", "j"))
    assert mock_purgatory.watched == 2


def test_purgatory_keys_of_every_shape_are_found_by_their_checks(kit, mock_purgatory):
    # The watch places each entry in its key's shard, with the hashes the
    # argument checks computed where it reuses them (a tuple of a few keys)
    # or computed again (a list, duplicates, many keys, any iterable).
    p = mock_purgatory
    shapes = [
        ("a",),
        ("b", "c", "d"),
        ["e", "f"],
        ("g", "g", "h"),
        tuple(f"k{i}" for i in range(12)),
        iter(["x", "y"]),
        (1, 2.0, (3, "t")),
    ]
    ops = []
    for keys in shapes:
        op = kit.Op(100_000)
        assert p.try_complete_else_watch(op, keys) is False
        ops.append(op)
    lasts = ["a", "d", "f", "h", "k11", "y", (3, "t")]
    for op, last in zip(ops, lasts):
        op.completable = True
        assert p.check_and_complete(last) == 1
    every = ["a", "b", "c", "d", "e", "f", "g", "h", "x", "y", 1, 2.0, (3, "t")]
    for key in every + [f"k{i}" for i in range(12)]:
        assert p.check_and_complete(key) == 0
    assert p.watched == 0


# -- the lock contract ---------------------------------------------------------
@pytest.mark.parametrize("lock_kind", ["default", "Lock", "RLock"])
def test_purgatory_try_complete_runs_under_op_lock(kit, mock_purgatory, lock_kind):
    lock = {"default": None, "Lock": threading.Lock(), "RLock": threading.RLock()}[
        lock_kind
    ]
    op = kit.Op(1000, lock)
    if lock is not None:
        assert op.lock is lock
    p = mock_purgatory
    p.try_complete_else_watch(op, ["k"])
    p.check_and_complete("k")
    op.completable = True
    assert p.check_and_complete("k") == 1
    assert op.lock_held_in_try == [True, True, True, True]
    assert op.lock_held_in_complete is True
    assert not held(op.lock)


def test_purgatory_expiry_runs_under_op_lock(kit, mock_purgatory):
    op = kit.Op(3)
    mock_purgatory.try_complete_else_watch(op, ["k"])
    mock_purgatory.timer.advance_clock(3)
    assert op.expired and op.lock_held_in_complete is True


@pytest.mark.slow
def test_purgatory_shared_lock_blocks_try_complete(kit, mock_purgatory):
    """While another thread holds the shared lock, check_and_complete waits for it."""
    shared = threading.Lock()
    op = kit.Op(1000, shared)
    mock_purgatory.try_complete_else_watch(op, ["k"])
    op.completable = True
    result: list[int] = []
    with shared:
        worker = threading.Thread(
            target=lambda: result.append(mock_purgatory.check_and_complete("k")),
            name="test-purgatory-checker",
            daemon=True,
        )
        worker.start()
        worker.join(0.05)
        assert worker.is_alive() and not op.completed
    worker.join(5)
    assert result == [1] and op.complete_calls == 1


class CountingLock:
    """A Lock that reports how many threads are waiting in acquire()."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self.waiting = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        with self._cond:
            self.waiting += 1
            self._cond.notify_all()
        try:
            return self._lock.acquire(blocking, timeout)
        finally:
            with self._cond:
                self.waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()

    def wait_for_waiters(self, n: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.waiting >= n, timeout=5)


def test_purgatory_force_complete_races_complete_once(kit, no_thread_leak):
    """Two threads that both saw the op open and wait on its lock: one completes it."""
    lock = CountingLock()
    op = kit.Op(1000, lock)
    results: list[bool] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(op.force_complete()),
            name=f"test-purgatory-force-{i}",
            daemon=True,
        )
        for i in range(2)
    ]
    with lock:
        for t in threads:
            t.start()
        assert lock.wait_for_waiters(2)  # both racers passed the done check
    for t in threads:
        t.join(5)
    assert sorted(results) == [False, True] and op.complete_calls == 1


def test_purgatory_check_continues_after_error_and_reraises(kit, mock_purgatory):
    class Boom(kit.Op):
        def try_complete(self) -> bool:
            raise RuntimeError("boom")

    bad, good = Boom(1000), kit.Op(1000)
    p = mock_purgatory
    with pytest.raises(RuntimeError, match="boom"):
        p.try_complete_else_watch(bad, ["k"])
    assert p.watched == 0 and p.delayed == 0  # failed on the first try: not registered
    p.try_complete_else_watch(good, ["k"])
    good.completable = True
    calls = []

    class Late(kit.Op):
        def try_complete(self) -> bool:
            calls.append(1)
            if len(calls) == 3:
                raise ValueError("late")
            return False

    late = Late(1000)
    p.try_complete_else_watch(late, ["k"])
    with pytest.raises(ValueError, match="late"):
        p.check_and_complete("k")
    # `late` (after `good`) raised; `good` was still completed, no lock left held.
    assert good.completed and not late.completed and not held(late.lock)
    assert len(calls) == 3


# -- many threads --------------------------------------------------------------
N_THREADS, N_OPS, ATTEMPTS = 20, 100, 20


def _attempt_op_class(kit: SimpleNamespace, sleep: Any) -> Any:
    class AttemptOp(kit.Base):  # type: ignore[misc, name-defined]
        """Completable once its ATTEMPTS-th completion event has been issued.

        The condition is state-based, like a real one (high watermark >=
        offset): Kafka's try-lock hand-off may merge events that arrive
        while another thread holds the op's lock into one re-check, so an op
        that counted try_complete *calls* could legitimately fall short.
        What must hold is that no completion is lost: once the last event is
        issued, the op completes, whoever runs the check.
        """

        def __init__(self, index: int) -> None:
            super().__init__(100_000)
            self.key = f"key{index}"
            self.issued = 0
            self._events = itertools.count(1)
            self.tries = 0
            self.complete_calls = 0

        def issue(self) -> None:
            self.issued = next(self._events)  # atomic under the GIL

        def try_complete(self) -> bool:
            self.tries += 1  # under the op lock
            should = self.issued >= ATTEMPTS
            sleep()
            return should and self.force_complete()

        def on_complete(self) -> None:
            self.complete_calls += 1

    return AttemptOp


@pytest.mark.slow
def test_purgatory_many_threads_lose_no_completion(kit, no_thread_leak):
    rnd = random.Random(7)
    naps = [rnd.random() * 0.0005 for _ in range(4096)]
    counter = iter(range(10**9))
    counter_lock = threading.Lock()  # a shared iterator is not thread-safe
    import time

    def sleep() -> None:
        with counter_lock:
            i = next(counter)
        time.sleep(naps[i % len(naps)])

    AttemptOp = _attempt_op_class(kit, sleep)
    timer = kit.SystemTimer(name="test-purgatory-threads")
    p = kit.Purgatory("threads", timer)
    try:
        ops = [AttemptOp(i) for i in range(N_OPS)]
        for op in ops:
            assert p.try_complete_else_watch(op, [op.key]) is False
        jobs = [op for op in ops for _ in range(ATTEMPTS)]
        rnd.shuffle(jobs)

        def attempt(op: Any) -> int:
            time.sleep(naps[id(op) % len(naps)])
            op.issue()
            return p.check_and_complete(op.key)

        with ThreadPoolExecutor(N_THREADS, thread_name_prefix="test-purgatory") as pool:
            completed = sum(pool.map(attempt, jobs))
        assert completed == N_OPS
        assert all(op.completed and op.complete_calls == 1 for op in ops)
        assert (p.delayed, p.watched) == (0, 0)
        p._check()
    finally:
        p.shutdown()
        timer.close()


def test_purgatory_many_attempts_on_mock_timer(kit):
    """The same race replayed on a MockTimer: a seeded interleaving, no sleeps."""
    AttemptOp = _attempt_op_class(kit, lambda: None)
    rnd = random.Random(11)
    timer = kit.MockTimer()
    p = kit.Purgatory("mock-threads", timer, purge_interval=50)
    ops = [AttemptOp(i) for i in range(N_THREADS * N_OPS // 20)]
    for op in ops:
        p.try_complete_else_watch(op, [op.key, "shared"])
    jobs = [op for op in ops for _ in range(ATTEMPTS)]
    rnd.shuffle(jobs)
    completed = 0
    for n, op in enumerate(jobs):
        op.issue()
        completed += p.check_and_complete(op.key if n % 3 else "shared")
        if n % 97 == 0:
            timer.advance_clock(1)
            p._check()
    assert completed == len(ops)
    assert all(op.complete_calls == 1 for op in ops)
    assert p.delayed == 0 and not timer.advance_clock(200_000)


def test_purgatory_event_between_try_and_watch_is_not_lost(kit, mock_purgatory):
    """An event between the first try and the watch is seen by the second try."""
    p = mock_purgatory

    class Racy(kit.Op):
        def try_complete(self) -> bool:
            if not self.lock_held_in_try:
                # First try: the "event" happens now, before the op is watched,
                # and its check finds nothing to complete.
                self.lock_held_in_try.append(True)
                self.completable = True
                assert p.check_and_complete("k") == 0
                return False
            return super().try_complete()

    op = Racy(1000)
    assert p.try_complete_else_watch(op, ["k"]) is True
    assert op.complete_calls == 1 and p.delayed == 0


# -- try-again hand-off (Kafka's maybeTryComplete) ------------------------------
def _gated_op_class(kit: SimpleNamespace) -> Any:
    """An op whose ``gate``-th try reads the state, then parks under the lock.

    The parked thread holds the op's lock until the test sets ``release``;
    its verdict is based on the state read *before* parking, so an event that
    arrives meanwhile is only seen if someone tries again.  The op never
    touches its ``lock`` property (that would make its lock "shared").
    """

    class GatedOp(kit.Base):  # type: ignore[misc, valid-type]
        def __init__(self, delay_ms: float) -> None:
            super().__init__(delay_ms)
            self.completable = False
            self.gate = 0  # park on this try (1-based); 0: never
            self.tries = 0
            self.parked = threading.Event()
            self.release = threading.Event()
            self.complete_calls = 0
            self.expire_calls = 0
            self.park_in_complete = False

        def try_complete(self) -> bool:
            self.tries += 1
            ready = self.completable
            if self.tries == self.gate:
                self.parked.set()
                assert self.release.wait(10)
            return ready and self.force_complete()

        def on_complete(self) -> None:
            self.complete_calls += 1
            if self.park_in_complete:
                self.parked.set()
                assert self.release.wait(10)

        def on_expiration(self) -> None:
            self.expire_calls += 1

    return GatedOp


def _in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(
        target=lambda: out.append(fn()), name="test-holder", daemon=True
    )
    t.start()
    return t, out


def test_purgatory_check_hands_off_to_the_checking_lock_holder(kit, mock_purgatory):
    """An event whose check finds the lock held by another check still completes it.

    Thread A's check holds the lock and has already judged the op not ready;
    the main thread's check arrives after the event, does not wait for the
    lock, and leaves A a retry; A completes the op after releasing the lock.
    """
    p = mock_purgatory
    op = _gated_op_class(kit)(1000)
    assert p.try_complete_else_watch(op, ["k"]) is False  # tries 1, 2
    op.gate = 3
    holder, result = _in_thread(lambda: p.check_and_complete("k"))
    assert op.parked.wait(10)
    op.completable = True  # the event ...
    assert p.check_and_complete("k") == 0  # ... its check: lock taken, no wait
    assert op.complete_calls == 0 and op._op_lock.locked()
    op.release.set()
    holder.join(10)
    assert result == [1]  # A's retry completed it
    assert op.tries == 4 and op.complete_calls == 1 and op.completed
    assert p.delayed == 0 and p.watched == 0


def test_purgatory_watch_hands_off_to_the_submitting_lock_holder(kit, mock_purgatory):
    """An event during try_complete_else_watch's second try is honoured by a retry."""
    p = mock_purgatory
    op = _gated_op_class(kit)(1000)
    op.gate = 2  # the try after the watch
    holder, result = _in_thread(lambda: p.try_complete_else_watch(op, ["k", "j"]))
    assert op.parked.wait(10)
    op.completable = True
    assert p.check_and_complete("j") == 0  # watched already, lock taken: flagged
    op.release.set()
    holder.join(10)
    assert result == [True]  # completed during the call, by its retry
    assert op.tries == 3 and op.complete_calls == 1
    assert p.delayed == 0  # never left in the timer
    # Both entries are stale now; checking their keys drops them.
    assert p.check_and_complete("k") == 0 and p.check_and_complete("j") == 0
    assert p.watched == 0


def test_purgatory_check_does_not_wait_for_an_expiring_op(kit, mock_purgatory):
    """A check skips an op the timer is expiring (lock held): expiry wins, once."""
    p = mock_purgatory
    op = _gated_op_class(kit)(5)
    assert p.try_complete_else_watch(op, ["k"]) is False
    op.park_in_complete = True
    holder, result = _in_thread(lambda: p.timer.advance_clock(5))
    assert op.parked.wait(10)
    op.completable = True
    assert p.check_and_complete("k") == 0  # does not block on the expiring op
    op.release.set()
    holder.join(10)
    assert result == [True]
    assert op.expired and op.complete_calls == 1 and op.expire_calls == 1
    assert op.tries == 2  # the flag left for the expiring thread needs no try


def test_purgatory_handed_out_lock_is_waited_for(kit, mock_purgatory):
    """After ``op.lock`` was handed out, a check waits for it instead of handing off."""
    p = mock_purgatory
    op = kit.Op(1000)
    p.try_complete_else_watch(op, ["k"])
    lock = op.lock  # from now on other code may hold it
    lock.acquire()
    op.completable = True
    checker, result = _in_thread(lambda: p.check_and_complete("k"))
    checker.join(0.05)
    assert checker.is_alive() and not op.completed  # waiting, not skipped
    lock.release()
    checker.join(10)
    assert result == [1] and op.complete_calls == 1


def test_purgatory_append_during_scan_is_kept(kit, mock_purgatory):
    """One-pass compaction keeps operations watched while the key is being scanned."""
    p = mock_purgatory
    late = kit.Op(1000)

    class Submitter(kit.Op):
        def try_complete(self) -> bool:
            if self.completable and not late._op_submitted:
                # Watch another op under the key being scanned, mid-scan.
                assert p.try_complete_else_watch(late, ["k"]) is False
            return super().try_complete()

    first = Submitter(1000)
    p.try_complete_else_watch(first, ["k"])
    first.completable = True
    assert p.check_and_complete("k") == 1
    p._check()
    assert p.watched == 1 and p.delayed == 1
    late.completable = True
    assert p.check_and_complete("k") == 1 and p.watched == 0


def test_purgatory_a_check_frees_done_operations_with_the_list_whole(
    kit, mock_purgatory
):
    """A check drops the done operations from the key's list, and may drop
    the last reference to one: its finalizer (Python code, which may let
    another thread scan the key) finds the list already cut to the live
    operations, not holding the ones being freed."""
    p = mock_purgatory
    lengths: list[int] = []

    class Finalized(kit.Op):
        def __del__(self) -> None:
            (ops,) = [s.watchers["k"] for s in p._shards if "k" in s.watchers]
            lengths.append(len(ops))

    other = kit.Op(1000)
    done = [Finalized(1000) for _ in range(3)]
    for op in [*done[:2], other, done[2]]:
        p.try_complete_else_watch(op, ["k"])
    for op in done:
        op.completable = True
    del op, done  # the watcher list holds the last references now
    assert p.check_and_complete("k") == 3
    assert lengths == [1, 1, 1]  # freed after the list was cut to `other`
    p._check()
    assert p.watched == 1 and p.delayed == 1
    other.completable = True
    assert p.check_and_complete("k") == 1 and p.watched == 0


def test_purgatory_many_threads_hand_off_without_losing_events(kit, no_thread_leak):
    """Threads checking the same keys concurrently (hand-offs happen) lose no event."""
    p = kit.Purgatory("handoff", kit.MockTimer())
    ops = [kit.Op(100_000) for _ in range(300)]
    for i, op in enumerate(ops):
        p.try_complete_else_watch(op, [f"k{i % 3}", "shared"])
    for op in ops:
        op.completable = True
    barrier = threading.Barrier(8)

    def worker(n: int) -> int:
        barrier.wait()
        return sum(p.check_and_complete(k) for k in ("shared", "k0", "k1", "k2") * 2)

    with ThreadPoolExecutor(8) as pool:
        total = sum(pool.map(worker, range(8)))
    assert total == len(ops)
    assert all(op.complete_calls == 1 for op in ops)
    assert p.watched == 0 and p.delayed == 0
    p.shutdown()


# -- lifecycle -----------------------------------------------------------------
def test_purgatory_owns_a_system_timer(no_thread_leak):
    with DelayedOperationPurgatory("Produce") as p:
        names = sorted(t.name for t in p.timer.threads)
        assert names == ["purgatory-Produce-executor", "purgatory-Produce-reaper"]
        assert all(t.daemon for t in p.timer.threads)
    assert p.closed and p.timer.closed
    p.shutdown()  # idempotent


@pytest.mark.slow
def test_purgatory_expiry_on_owned_timer(kit, no_thread_leak):
    base = kit.Op
    expired = threading.Event()

    class Op(base):  # type: ignore[misc, valid-type]
        def on_expiration(self) -> None:
            super().on_expiration()
            expired.set()

    # timer=None: the purgatory owns a SystemTimer of its own core.
    p = kit.Purgatory("expiry")
    try:
        short, long_ = Op(20), Op(200_000)
        p.try_complete_else_watch(short, ["a"])
        p.try_complete_else_watch(long_, ["b"])
        assert expired.wait(5)
        assert short.expired and (short.complete_calls, short.expire_calls) == (1, 1)
        assert not long_.completed and p.delayed == 1
    finally:
        p.shutdown()
    assert p.timer.closed
    assert not long_.completed and not long_.expired and long_.cancelled


@pytest.mark.slow
def test_purgatory_reaper_false_needs_advance_clock(no_thread_leak):
    expired = threading.Event()
    base = _default_kit().Op

    class Op(base):  # type: ignore[misc, valid-type]
        def on_expiration(self) -> None:
            expired.set()

    with DelayedOperationPurgatory("manual", reaper=False) as p:
        assert [t.name for t in p.timer.threads] == ["purgatory-manual-executor"]
        op = Op(1)
        p.try_complete_else_watch(op, ["k"])
        assert not expired.wait(0.05)  # nobody drives the clock
        assert p.advance_clock(1000) is True
        assert expired.wait(5) and op.expired


def test_purgatory_shutdown_leaves_ops_pending_forever(kit):
    timer = kit.MockTimer()
    p = kit.Purgatory("mock", timer)
    op = kit.Op(10)
    p.try_complete_else_watch(op, ["k"])
    p.shutdown()
    p.shutdown()
    assert not timer.closed  # not ours to close
    assert timer.advance_clock(100) is False
    assert (op.complete_calls, op.expire_calls, op.completed) == (0, 0, False)
    assert (p.watched, p.check_and_complete("k")) == (0, 0)
    with pytest.raises(RuntimeError, match="shut down"):
        p.try_complete_else_watch(kit.Op(10), ["k"])


def test_purgatory_mock_timer_due_op_expires_inside_add(kit, mock_purgatory):
    op = kit.Op(0)
    assert mock_purgatory.try_complete_else_watch(op, ["k"]) is False
    assert op.expired and op.complete_calls == 1 and mock_purgatory.delayed == 0


# -- bad input -----------------------------------------------------------------
def test_purgatory_bad_input_registers_nothing(kit, mock_purgatory):
    p = mock_purgatory
    op = kit.Op(100)
    with pytest.raises(TypeError, match="operation must be a DelayedOperation"):
        p.try_complete_else_watch(object(), ["k"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"keys must not be empty, got \[\]"):
        p.try_complete_else_watch(op, [])
    with pytest.raises(ValueError, match="keys must not be empty"):
        p.try_complete_else_watch(op, iter(()))
    with pytest.raises(TypeError, match=r"not a str .*'k1'"):
        p.try_complete_else_watch(op, "k1")
    with pytest.raises(TypeError, match="keys must be an iterable"):
        p.try_complete_else_watch(op, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"key \['x'\] in keys must be hashable"):
        p.try_complete_else_watch(op, ["ok", ["x"]])
    with pytest.raises(TypeError, match="key must be hashable, got {}"):
        p.check_and_complete({})
    with pytest.raises(TypeError, match="key must be hashable"):
        p.cancel_for_key([1])
    assert (p.watched, p.delayed, p.keys()) == (0, 0, [])
    assert p.try_complete_else_watch(op, ["k"]) is False  # still usable
    with pytest.raises(ValueError, match="already submitted"):
        p.try_complete_else_watch(op, ["k2"])
    assert p.watched == 1


@pytest.mark.c_extension
def test_purgatory_rejects_op_and_timer_of_other_core():
    from twins import twin_package

    import tickwheel

    pure_pkg = twin_package()
    compiled = DelayedOperationPurgatory("x", tickwheel.MockTimer())
    pure = pure_pkg.purgatory.DelayedOperationPurgatory("y", pure_pkg.MockTimer())
    with pytest.raises(TypeError, match="same core"):
        compiled.try_complete_else_watch(pure_pkg.purgatory.DelayedOperation(10), ["k"])
    with pytest.raises(TypeError, match="same core"):
        pure.try_complete_else_watch(tickwheel.DelayedOperation(10), ["k"])
    with pytest.raises(TypeError, match="timer must be a SystemTimer or MockTimer"):
        DelayedOperationPurgatory("z", pure_pkg.MockTimer())
    with pytest.raises(TypeError, match="timer must be a SystemTimer or MockTimer"):
        pure_pkg.purgatory.DelayedOperationPurgatory("z", tickwheel.MockTimer())
    assert (compiled.watched, pure.watched, compiled.delayed, pure.delayed) == (
        0,
        0,
        0,
        0,
    )


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"name": 3}, TypeError, "name must be a str, got 3"),
        ({"name": ""}, ValueError, "name must not be empty"),
        ({"purge_interval": -1}, ValueError, "purge_interval must be >= 0, got -1"),
        ({"purge_interval": 1.5}, TypeError, "purge_interval must be an int, got 1.5"),
        ({"purge_interval": True}, TypeError, "purge_interval must be an int"),
        ({"timer": "wheel"}, TypeError, "timer must be a SystemTimer or MockTimer"),
        ({"reaper": 0}, TypeError, "reaper must be a bool, got 0"),
        ({"shards": 3}, ValueError, "shards must be a power of two >= 1, got 3"),
    ],
)
def test_purgatory_bad_constructor_arguments(kwargs, exc, match, no_thread_leak):
    args = {"name": "p", **kwargs}
    with pytest.raises(exc, match=match):
        DelayedOperationPurgatory(**args)


def test_purgatory_reaper_false_with_given_timer_caller_drives_it(kit, no_thread_leak):
    """Kafka's DelayedOperationTest setup (a mock timer, reaper disabled) is
    accepted: no thread is started, and advance_clock expires operations."""
    before = threading.active_count()
    p = kit.Purgatory("p", kit.MockTimer(), reaper=False)
    assert threading.active_count() == before
    op = kit.Op(20)
    assert p.try_complete_else_watch(op, ["k"]) is False
    assert p.advance_clock(19) is False and not op.completed
    assert p.advance_clock(1) is True
    assert op.expired and op.expire_calls == 1 and p.delayed == 0
    p.shutdown()
    assert p.timer.closed is False  # a given timer is the caller's to close


def test_delayed_operation_bad_arguments(kit):
    with pytest.raises(
        TypeError, match="lock must be a threading.Lock/RLock-like object, got 5"
    ):
        kit.Op(10, 5)
    with pytest.raises(TypeError, match="delay_ms"):
        kit.Op("soon")
    with pytest.raises(NotImplementedError, match="must override try_complete"):
        kit.Base(10).try_complete()


# -- model test ----------------------------------------------------------------
KEYS = ["a", "b", "c", "d"]


class PurgatoryModel(RuleBasedStateMachine):
    """Random submits, events, force completions, cancels, clock moves and purges,
    applied to a MockTimer purgatory and to a plain-dict reference."""

    kit: SimpleNamespace

    def __init__(self) -> None:
        super().__init__()
        self.timer = self.kit.MockTimer()
        self.interval = 3
        self.p = self.kit.Purgatory("model", self.timer, purge_interval=self.interval)
        self.now = 0
        self.ops: list[Any] = []
        # Reference state: per op, "open" | "completed" | "expired" | "withdrawn";
        # per key, the op indexes still listed (stale ones included).
        self.state: dict[int, str] = {}
        self.deadline: dict[int, int] = {}
        self.lists: dict[str, list[int]] = {}
        self.estimated = 0

    def _delayed(self) -> int:
        return sum(1 for s in self.state.values() if s == "open")

    def _maybe_purge(self) -> None:
        if self.estimated - self._delayed() > self.interval:
            self.estimated = self._delayed()
            for key in list(self.lists):
                keep = [i for i in self.lists[key] if self.state[i] == "open"]
                if keep:
                    self.lists[key] = keep
                else:
                    del self.lists[key]

    @rule(
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
        delay=st.integers(0, 40),
        completable=st.booleans(),
    )
    def submit(self, keys: list[str], delay: int, completable: bool) -> None:
        op = self.kit.Op(delay)
        op.completable = completable
        i = len(self.ops)
        self.ops.append(op)
        got = self.p.try_complete_else_watch(op, keys)
        assert got is completable
        if completable:
            self.state[i] = "completed"
            return
        for key in dict.fromkeys(keys):
            self.lists.setdefault(key, []).append(i)
        self.estimated += 1
        if delay == 0:
            self.state[i] = "expired"  # due at once: runs inside add()
        else:
            self.state[i] = "open"
            self.deadline[i] = self.now + delay
        self._maybe_purge()

    @precondition(lambda self: self.ops)
    @rule(data=st.data())
    def make_completable(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.ops) - 1))
        self.ops[i].completable = True

    @rule(key=st.sampled_from(KEYS))
    def check(self, key: str) -> None:
        expected = 0
        listed = self.lists.get(key, [])
        for i in listed:
            if self.state[i] == "open" and self.ops[i].completable:
                self.state[i] = "completed"
                expected += 1
        assert self.p.check_and_complete(key) == expected
        if key in self.lists and any(self.state[i] != "open" for i in listed):
            keep = [i for i in listed if self.state[i] == "open"]
            if keep:
                self.lists[key] = keep
            else:
                del self.lists[key]

    @precondition(lambda self: self.ops)
    @rule(data=st.data())
    def force(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.ops) - 1))
        was_open = self.state[i] == "open"
        assert self.ops[i].force_complete() is was_open
        if was_open:
            self.state[i] = "completed"

    @rule(key=st.sampled_from(KEYS))
    def cancel(self, key: str) -> None:
        listed = self.lists.pop(key, [])
        expected = [self.ops[i] for i in listed if self.state[i] == "open"]
        for i in listed:
            if self.state[i] == "open":
                self.state[i] = "withdrawn"
        assert self.p.cancel_for_key(key) == expected

    @rule(ms=st.integers(0, 25))
    def advance(self, ms: int) -> None:
        self.now += ms
        for i, s in self.state.items():
            if s == "open" and self.deadline[i] <= self.now:
                self.state[i] = "expired"
        self.p.advance_clock(ms)
        self._maybe_purge()

    @rule()
    def purge(self) -> None:
        self.p.purge()
        self.estimated = self._delayed()
        for key in list(self.lists):
            keep = [i for i in self.lists[key] if self.state[i] == "open"]
            if keep:
                self.lists[key] = keep
            else:
                del self.lists[key]

    @invariant()
    def agrees(self) -> None:
        for i, op in enumerate(self.ops):
            s = self.state[i]
            assert op.completed is (s in ("completed", "expired")), (i, s)
            assert op.expired is (s == "expired")
            assert op.withdrawn is (s == "withdrawn")
            assert op.complete_calls == (s in ("completed", "expired"))
            assert op.expire_calls == (s == "expired")
        assert self.p.delayed == self._delayed()
        assert self.p.watched == sum(map(len, self.lists.values()))
        assert sorted(self.p.keys()) == sorted(self.lists)
        assert self.timer.now_ms == self.now
        self.p._check()
        self.timer._check()


def test_purgatory_model(kit):
    class Model(PurgatoryModel):
        pass

    Model.kit = kit
    Model.TestCase.settings = settings(
        max_examples=60, stateful_step_count=40, deadline=None
    )
    Model.TestCase().runTest()


# -- hooks overridden in Python ----------------------------------------------------
def test_python_overrides_of_the_hooks_are_always_the_ones_called(kit, mock_purgatory):
    """The compiled hooks are cpdef: the purgatory calls them in C unless the
    subclass overrides them in Python.  Overrides, overrides of overrides,
    and methods replaced on the class after use must all be seen."""
    p, timer = mock_purgatory, mock_purgatory._timer
    calls: list[tuple[str, int]] = []

    class Op(kit.Base):  # type: ignore[misc, name-defined]
        def __init__(self, n: int, ready: bool = False) -> None:
            super().__init__(10)
            self.n, self.ready = n, ready

        def try_complete(self) -> bool:
            calls.append(("try", self.n))
            return self.ready and self.force_complete()

        def on_complete(self) -> None:
            calls.append(("complete", self.n))

        def on_expiration(self) -> None:
            calls.append(("expired", self.n))

    class Loud(Op):
        def force_complete(self) -> bool:
            calls.append(("force", self.n))
            return bool(super().force_complete())

    assert p.try_complete_else_watch(Op(1, ready=True), ["k"])
    assert calls == [("try", 1), ("complete", 1)]
    calls.clear()
    assert p.try_complete_else_watch(Loud(2, ready=True), ["k"])
    assert calls == [("try", 2), ("force", 2), ("complete", 2)]
    # Replace a hook on the class after the purgatory has called it.
    calls.clear()
    Op.on_complete = lambda self: calls.append(("patched", self.n))  # type: ignore[method-assign]
    assert p.try_complete_else_watch(Op(3, ready=True), ["k"])
    assert calls == [("try", 3), ("patched", 3)]
    # Alternate two subclasses through one purgatory, and expire one.
    calls.clear()
    ops = [Op(4), Loud(5)]
    for op in ops:
        assert not p.try_complete_else_watch(op, ["k"])
    for op in ops:
        op.ready = True
    assert p.check_and_complete("k") == 2
    assert ("patched", 4) in calls and ("force", 5) in calls and ("patched", 5) in calls
    calls.clear()
    late = Loud(6)
    assert not p.try_complete_else_watch(late, ["k"])
    timer.advance_clock(20)
    assert calls[-2:] == [("patched", 6), ("expired", 6)] and late.completed
    # The base class still refuses to be used without try_complete.
    with pytest.raises(NotImplementedError, match="must override try_complete"):
        kit.Base(10).try_complete()
