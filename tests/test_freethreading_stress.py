"""Races on one timer and one purgatory, for free-threaded CPython (and the GIL).

The lock protocol of ``_wheel.pxd`` ("Thread-safety contract") and of
``_purgatory.pyx`` (``_Lock``) under load: several threads schedule, cancel
tasks other threads made, postpone and expire on ONE timer; purgatory
submitters race ``check_and_complete`` and expiry on shared keys.  Checked:

* exactly once: every task runs at most once, and every task not cancelled
  runs once; a ``cancel()`` that returned True is never followed by a run
  (no lost cancel); a successful ``postpone`` moves the deadline;
* never early: a task runs at or after ``now`` at scheduling (or at its last
  successful postpone) plus its delay, on the timer's own clock;
* accounting: ``len(timer)`` returns to 0, and the purgatory's ``watched``
  and ``delayed`` return to 0 (after a purge), each operation completed
  exactly once (completed or expired, never both).

With a GIL the threads interleave at switch points
(``sys.setswitchinterval`` is shortened); on a free-threaded build with
``PYTHON_GIL=0`` they run at once on both cores.  ``tests/test_stress.py``
(tests/reliability/stress.py) covers add/cancel/re-add with every executor kind.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from typing import Any

import pytest

pytestmark = pytest.mark.stress

THREADS = 4
PER_THREAD = 1_500
WAIT_S = 60.0


@pytest.fixture(autouse=True)
def _fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def _join(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.join(WAIT_S)
    assert not [t for t in threads if t.is_alive()], "a stress thread hung"


class _Ledger:
    """What happened to each task, recorded from any thread."""

    def __init__(self) -> None:
        # Re-entrant: a MockTimer runs a task that is due when added (or
        # postponed to 0) inside that call, under this lock.
        self.lock = threading.RLock()
        self.runs: dict[int, list[int]] = {}  # id -> clock readings at run
        self.earliest: dict[int, int] = {}  # id -> not-before deadline
        self.cancelled: set[int] = set()  # cancel() returned True
        self.errors: list[str] = []

    def ran(self, key: int, now: int) -> None:
        with self.lock:
            self.runs.setdefault(key, []).append(now)

    def check(self, total: int) -> None:
        assert not self.errors, self.errors[:5]
        twice = {k: v for k, v in self.runs.items() if len(v) > 1}
        assert not twice, f"ran more than once: {list(twice.items())[:5]}"
        lost = self.cancelled & set(self.runs)
        assert not lost, f"cancel() returned True but the task ran: {sorted(lost)[:5]}"
        missing = set(range(total)) - self.cancelled - set(self.runs)
        assert not missing, f"neither ran nor cancelled: {sorted(missing)[:5]}"
        early = {
            k: (v[0], self.earliest[k])
            for k, v in self.runs.items()
            if v[0] < self.earliest[k]
        }
        assert not early, f"ran early (run, not before): {list(early.items())[:5]}"


def _churn(timer: Any, ledger: _Ledger, now: Any, seed: int, base: int,
           handles: list[Any], handles_lock: threading.Lock,
           start: threading.Event) -> None:
    """Schedule PER_THREAD tasks; cancel and postpone tasks other threads made."""
    rnd = random.Random(seed)
    start.wait()
    try:
        for i in range(PER_THREAD):
            key = base + i
            delay = rnd.randrange(0, 40)
            with ledger.lock:
                ledger.earliest[key] = now() + delay
            task = timer.schedule(delay, lambda k=key: ledger.ran(k, now()))
            with handles_lock:
                handles.append((key, task))
                victim = handles[rnd.randrange(len(handles))] if handles else None
            if victim is None:
                continue
            vkey, vtask = victim
            roll = rnd.random()
            if roll < 0.3:
                if vtask.cancel():
                    with ledger.lock:
                        ledger.cancelled.add(vkey)
            elif roll < 0.5:
                d2 = rnd.randrange(0, 40)
                # The not-before bound is taken before the call: the new
                # deadline (later or sooner) is computed from a clock at
                # least this late, and replaces the old one.
                with ledger.lock:
                    bound = now() + d2
                    if vtask.postpone(d2):
                        ledger.earliest[vkey] = bound
    except BaseException as exc:  # pragma: no cover - reported by check()
        ledger.errors.append(repr(exc))


def test_one_mock_timer_many_threads_and_a_driver(timers):
    timer = timers.MockTimer(start_ms=0)
    ledger = _Ledger()
    handles: list[Any] = []
    handles_lock = threading.Lock()
    start = threading.Event()
    done = threading.Event()

    def now() -> int:
        return timer.now_ms

    def drive() -> None:
        start.wait()
        try:
            while not done.is_set():
                timer.advance_clock(1)
        except BaseException as exc:  # pragma: no cover
            ledger.errors.append(repr(exc))

    workers = [
        threading.Thread(
            target=_churn,
            args=(timer, ledger, now, s, s * PER_THREAD, handles, handles_lock, start),
        )
        for s in range(THREADS)
    ]
    driver = threading.Thread(target=drive)
    for t in [*workers, driver]:
        t.start()
    start.set()
    _join(workers)
    done.set()
    _join([driver])
    while len(timer):
        timer.advance_clock(50)
    ledger.check(THREADS * PER_THREAD)
    assert len(timer) == 0
    timer._check()
    timer.close()


@pytest.mark.parametrize("lanes", [None, 4], ids=["default-lanes", "4-lanes"])
def test_one_system_timer_many_threads(timers, no_thread_leak, monkeypatch, lanes):
    # None: the build's own (one lane with a GIL, one per CPU free-threaded);
    # 4: lanes on every build (tests/test_lanes.py).
    if lanes is not None:
        monkeypatch.setattr(timers.timer, "_LANES", lanes)
    timer = timers.SystemTimer("ft-stress")
    ledger = _Ledger()
    handles: list[Any] = []
    handles_lock = threading.Lock()
    start = threading.Event()

    def now() -> int:
        return timer.now_ms

    try:
        workers = [
            threading.Thread(
                target=_churn,
                args=(
                    timer, ledger, now, s, s * PER_THREAD, handles, handles_lock,
                    start,
                ),
            )
            for s in range(THREADS)
        ]
        for t in workers:
            t.start()
        start.set()
        _join(workers)
        deadline = time.monotonic() + WAIT_S
        while len(timer) and time.monotonic() < deadline:
            time.sleep(0.01)
        # The last task may still be running on the executor.
        total = THREADS * PER_THREAD
        while (len(ledger.runs) + len(ledger.cancelled) < total
               and time.monotonic() < deadline):
            time.sleep(0.01)
        assert len(timer) == 0
        ledger.check(total)
    finally:
        timer.close()


def test_purgatory_shared_keys_check_and_expiry_race(timers):
    purgatory_mod = timers.purgatory
    timer = timers.MockTimer(start_ms=0)
    purg = purgatory_mod.DelayedOperationPurgatory(
        "ft-stress", timer, purge_interval=50, reaper=False
    )
    keys = list(range(8))
    ready: dict[int, bool] = {k: False for k in keys}
    outcomes: dict[int, list[str]] = {}
    outcomes_lock = threading.Lock()
    errors: list[str] = []

    class Op(purgatory_mod.DelayedOperation):
        def __init__(self, n: int, key: int, delay: int) -> None:
            super().__init__(delay)
            self.n = n
            self.key = key

        def try_complete(self) -> bool:
            if ready[self.key]:
                return self.force_complete()
            return False

        def on_complete(self) -> None:
            with outcomes_lock:
                outcomes.setdefault(self.n, []).append(
                    "expired" if self.expired else "completed"
                )

    class OtherOp(Op):
        """A second operation type: submitters mixing types race the
        purgatory's check of the operation's type."""

    start = threading.Event()
    submitted = threading.Event()

    def submit(seed: int) -> None:
        rnd = random.Random(seed)
        start.wait()
        try:
            for i in range(PER_THREAD):
                key = rnd.choice(keys)
                kind = Op if rnd.random() < 0.5 else OtherOp
                op = kind(seed * PER_THREAD + i, key, rnd.randrange(1, 30))
                extra = rnd.choice(keys)
                purg.try_complete_else_watch(op, [key, extra])
        except BaseException as exc:  # pragma: no cover
            errors.append(repr(exc))

    def check(seed: int) -> None:
        rnd = random.Random(seed)
        start.wait()
        try:
            while not submitted.is_set():
                key = rnd.choice(keys)
                ready[key] = rnd.random() < 0.5
                purg.check_and_complete(key)
        except BaseException as exc:  # pragma: no cover
            errors.append(repr(exc))

    def expire() -> None:
        start.wait()
        try:
            while not submitted.is_set():
                timer.advance_clock(1)
        except BaseException as exc:  # pragma: no cover
            errors.append(repr(exc))

    submitters = [threading.Thread(target=submit, args=(s,)) for s in range(THREADS)]
    others = [threading.Thread(target=check, args=(100 + s,)) for s in range(2)]
    others.append(threading.Thread(target=expire))
    for t in [*submitters, *others]:
        t.start()
    start.set()
    _join(submitters)
    submitted.set()
    _join(others)
    # Drain: every key completable, then time out whatever is left.
    for k in keys:
        ready[k] = True
        purg.check_and_complete(k)
    while purg.delayed:
        timer.advance_clock(50)
    assert not errors, errors[:5]
    total = THREADS * PER_THREAD
    twice = {n: o for n, o in outcomes.items() if len(o) != 1}
    assert not twice, f"not completed exactly once: {list(twice.items())[:5]}"
    assert len(outcomes) == total
    assert purg.delayed == 0
    purg.purge()  # drops the completed operations from the watcher lists
    assert purg.watched == 0
    assert len(timer) == 0
    purg.shutdown()
    timer.close()


def test_one_task_added_to_two_timers_at_once_lands_in_one(timers):
    # With one lock per timer nothing but the task's claim orders two
    # timers taking one idle task (_wheel.pxd, "Lanes"): exactly one add()
    # wins, the other is refused as with a GIL, and neither ring breaks.
    # (A race this narrow is ThreadSanitizer's to see: .ci/tsan runs this.)
    a, b = timers.MockTimer(start_ms=0), timers.MockTimer(start_ms=0)
    refused = 0
    for _ in range(200):
        task = timers.TimerTask(50, print)
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def add(
            timer: Any, task: Any = task, barrier: threading.Barrier = barrier
        ) -> None:
            barrier.wait()
            try:
                timer.add(task)
            except ValueError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=add, args=(t,)) for t in (a, b)]
        for t in threads:
            t.start()
        _join(threads)
        assert len(errors) == 1 and "pending in another timer" in str(errors[0])
        refused += 1
        assert len(a) + len(b) == 1
        a._check()
        b._check()
        assert task.cancel()
    assert refused == 200 and len(a) == len(b) == 0
