"""CountdownOperation, the purgatory's compiled operation, on both cores.

It completes once ``count_down`` has taken its count to zero and a check
(or the watch's tries) finds it so, or expires; ``callback(op)`` is its
on_complete.  The purgatory's scan skips a CountdownOperation whose count is
not zero without taking its lock.  Also here: how the purgatory calls the
hooks of Python subclasses (the attribute lookup's rules, instance
attributes included) and that completion unlinks the timer entry with
TimerTask's own cancel.
"""

from __future__ import annotations

import threading
import weakref
from types import SimpleNamespace
from typing import Any

import pytest


@pytest.fixture
def kit(timers: Any) -> SimpleNamespace:
    package = timers.package
    return SimpleNamespace(
        Countdown=package.purgatory.CountdownOperation,
        Base=package.purgatory.DelayedOperation,
        MockTimer=package.MockTimer,
        Purgatory=package.purgatory.DelayedOperationPurgatory,
    )


@pytest.fixture
def purgatory(kit: SimpleNamespace):
    p = kit.Purgatory("countdown", kit.MockTimer())
    yield p
    p._check()
    p.shutdown()


class Calls:
    """A callback that records each call and whether the op's lock was held."""

    def __init__(self) -> None:
        self.ops: list[Any] = []
        self.held: list[bool] = []

    def __call__(self, op: Any) -> None:
        lock = op._op_lock
        self.ops.append(op)
        self.held.append(
            lock._is_owned() if hasattr(lock, "_is_owned") else lock.locked()
        )


def test_completes_when_the_count_reaches_zero(kit, purgatory):
    calls = Calls()
    callback_ref = weakref.ref(calls)
    op = kit.Countdown(500, calls, 2)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
    assert op.count_down() == 1
    assert purgatory.check_and_complete("a") == 0
    assert not op.completed and calls.ops == []
    assert op.count_down() == 0
    assert purgatory.check_and_complete("b") == 1
    assert op.completed and not op.expired and op.count == 0
    assert calls.ops == [op] and calls.held == [True]
    del calls  # the operation dropped it after its one call
    assert callback_ref() is None
    assert purgatory.delayed == 0  # the timer entry is gone
    assert purgatory.check_and_complete("a") == 0  # a's entry is dropped now
    assert purgatory.watched == 0


def test_expires_with_the_callback_told(kit, purgatory):
    calls = Calls()
    op = kit.Countdown(100, calls, 3)
    assert purgatory.try_complete_else_watch(op, ["k"]) is False
    op.count_down(2)
    purgatory.timer.advance_clock(99)
    assert calls.ops == []
    purgatory.timer.advance_clock(1)
    assert calls.ops == [op] and calls.held == [True]
    assert op.expired and op.completed and op.count == 1
    # Late events change the count, never the outcome.
    assert op.count_down() == 0
    assert purgatory.check_and_complete("k") == 0
    assert calls.ops == [op]


def test_count_zero_completes_on_the_first_try(kit, purgatory):
    calls = Calls()
    op = kit.Countdown(100, calls, 0)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert calls.ops == [op] and purgatory.watched == 0 and purgatory.delayed == 0


def test_count_down_stops_at_zero_and_without_a_callback(kit, purgatory):
    op = kit.Countdown(100, count=5)
    assert op.count_down(3) == 2
    assert op.count_down(0) == 2
    assert op.count_down(10) == 0 and op.count == 0
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert op.completed
    assert op.force_complete() is False


def test_force_complete_and_shared_lock(kit, purgatory):
    lock = threading.RLock()
    calls = Calls()
    ops = [kit.Countdown(100, calls, 1, lock), kit.Countdown(100, calls, 1, lock=lock)]
    for op in ops:
        assert op.lock is lock
        purgatory.try_complete_else_watch(op, ["k"])
    assert ops[0].force_complete() is True
    ops[1].count_down()
    assert purgatory.check_and_complete("k") == 1
    assert calls.ops == ops


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"callback": 3}, TypeError, "callback must be callable or None, got 3"),
        ({"count": -1}, ValueError, "count must be >= 0, got -1"),
        ({"count": 1.5}, TypeError, "count must be an int, got 1.5"),
        ({"count": True}, TypeError, "count must be an int, got True"),
        ({"count": "2"}, TypeError, "count must be an int, got '2'"),
        ({"count": 2**70}, ValueError, f"count must be <= {2**63 - 1}, got {2**70}"),
        ({"count": -(2**70)}, ValueError, f"count must be >= 0, got {-(2**70)}"),
        ({"delay_ms": "x"}, TypeError, "delay_ms"),
        ({"lock": object()}, TypeError, "lock must be a threading.Lock/RLock-like"),
    ],
)
def test_bad_arguments_are_named(kit, kwargs, error, message):
    args = {"delay_ms": 100, **kwargs}
    with pytest.raises(error, match=message.replace("(", r"\(").replace("+", r"\+")):
        kit.Countdown(**args)


@pytest.mark.parametrize(
    ("n", "error", "message"),
    [
        (-2, ValueError, "n must be >= 0, got -2"),
        (1.0, TypeError, "n must be an int, got 1.0"),
        (None, TypeError, "n must be an int, got None"),
        (False, TypeError, "n must be an int, got False"),
    ],
)
def test_count_down_refuses_bad_n(kit, n, error, message):
    op = kit.Countdown(100, count=3)
    with pytest.raises(error, match=message):
        op.count_down(n)
    assert op.count == 3


def test_repr(kit, purgatory):
    op = kit.Countdown(250, count=2)
    assert repr(op) == "<CountdownOperation delay_ms=250 count=2 open>"
    op.count_down(2)
    purgatory.try_complete_else_watch(op, ["k"])
    assert repr(op) == "<CountdownOperation delay_ms=250 count=0 completed>"


def test_scan_skips_a_waiting_countdown_without_its_lock(kit, purgatory):
    # op.lock hands the lock out, so a check would wait for it; with the
    # count above zero the scan passes over the operation instead.
    calls = Calls()
    op = kit.Countdown(500, calls, 1)
    purgatory.try_complete_else_watch(op, ["k"])
    lock = op.lock
    lock.acquire()
    result: list[int] = []
    t = threading.Thread(
        target=lambda: result.append(purgatory.check_and_complete("k"))
    )
    t.start()
    t.join(30)
    assert not t.is_alive() and result == [0]
    assert not op._op_retry  # no hand-off either: nothing to retry
    lock.release()
    op.count_down()
    assert purgatory.check_and_complete("k") == 1
    assert calls.ops == [op]


@pytest.mark.parametrize("during", ["purge", "check"])
def test_a_scan_sees_every_entry_when_a_callback_compacts_its_list(
    kit, purgatory, during
):
    # The first operation's callback purges, or checks the same key, while
    # the outer scan is in the middle of the list; a stale entry sits
    # before the rest.  Edited in place, the list would shift under the
    # outer scan and it would pass over ``ops[2]``: the compaction must
    # leave the list being scanned whole.
    def first_done(op: Any) -> None:
        if during == "purge":
            assert purgatory.purge() == 2  # the first and the stale entry
        else:
            assert purgatory.check_and_complete("k") == 3  # the last three

    ops = [kit.Countdown(500, first_done)]
    ops += [kit.Countdown(500) for _ in range(4)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k"])
    assert ops[1].force_complete()  # stale: done, still in the list
    for op in ops:
        op.count_down()
    completed = purgatory.check_and_complete("k")
    assert all(op.completed for op in ops)
    assert completed == (4 if during == "purge" else 1)
    assert purgatory.watched == 0 and purgatory.keys() == []


def test_a_check_compacts_its_list_keeping_the_order(kit, purgatory):
    ops = [kit.Countdown(500) for _ in range(6)]
    for op in ops:
        purgatory.try_complete_else_watch(op, ["k", "j"])
    for i in (0, 2, 5):
        ops[i].count_down()
    assert purgatory.check_and_complete("k") == 3
    shard = purgatory._shards[hash("k") & purgatory._mask]
    assert shard.watchers["k"] == [ops[1], ops[3], ops[4]]
    assert purgatory.watched == 3 + 6  # "j" keeps its stale entries
    assert purgatory.purge() == 3
    assert purgatory.watched == 6


def test_many_threads_count_down_each_completes_once(kit, no_thread_leak):
    timer = kit.MockTimer()
    purgatory = kit.Purgatory("threads", timer)
    calls = Calls()
    threads_n, ops_n = 4, 300
    ops = [kit.Countdown(60_000, calls, threads_n) for _ in range(ops_n)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [i % 7, "all"])
    barrier = threading.Barrier(threads_n)

    def events() -> None:
        barrier.wait()
        for i, op in enumerate(ops):
            op.count_down()
            purgatory.check_and_complete(i % 7 if i % 2 else "all")

    workers = [threading.Thread(target=events) for _ in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(map(id, calls.ops)) == sorted(map(id, ops))
    assert all(op.completed and not op.expired for op in ops)
    assert purgatory.delayed == 0
    purgatory._check()
    purgatory.shutdown()


def test_python_subclass_hooks_are_called(kit, purgatory):
    log: list[str] = []

    class Audited(kit.Countdown):
        def try_complete(self) -> bool:
            log.append("try")
            return super().try_complete()

        def on_complete(self) -> None:
            log.append("complete")
            super().on_complete()

    calls = Calls()
    op = Audited(100, calls, 1)
    purgatory.try_complete_else_watch(op, ["k"])
    assert log == ["try", "try"]  # before and after the watch
    op.count_down()
    assert purgatory.check_and_complete("k") == 1
    assert log == ["try", "try", "try", "complete"] and calls.ops == [op]


def test_instance_attribute_hooks_are_honoured(kit, purgatory):
    # The purgatory finds a hook as the attribute lookup would: an instance
    # attribute of an operation with a __dict__ comes first.
    log: list[str] = []

    class Op(kit.Base):
        def try_complete(self) -> bool:
            return bool(self.force_complete())

        def on_complete(self) -> None:
            log.append("class")

    op = Op(100)
    op.on_complete = lambda: log.append("instance")
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert log == ["instance"]


def test_completion_unlinks_with_timer_tasks_own_cancel(kit, purgatory):
    cancels: list[str] = []

    class Op(kit.Base):
        def try_complete(self) -> bool:
            return False

        def cancel(self) -> bool:  # not the timer entry's: never called
            cancels.append("override")
            return False

    op = Op(100)
    purgatory.try_complete_else_watch(op, ["k"])
    assert purgatory.delayed == 1
    assert op.force_complete() is True
    assert purgatory.delayed == 0 and cancels == []
    purgatory.timer.advance_clock(200)
    assert op.completed and not op.expired


def test_hooks_assigned_to_a_class_later_are_called(kit, purgatory):
    # A Python class that overrides no hook has them called in C; the
    # decision is per class and must see a hook assigned to it afterwards.
    class Slotted(kit.Countdown):
        __slots__ = ()

    calls = Calls()
    first = Slotted(100, calls, 0)
    assert purgatory.try_complete_else_watch(first, ["k"]) is True
    assert calls.ops == [first]
    log: list[str] = []

    def on_complete(self: Any) -> None:
        log.append("patched")

    Slotted.on_complete = on_complete  # type: ignore[method-assign]
    try:
        second = Slotted(100, calls, 0)
        assert purgatory.try_complete_else_watch(second, ["k"]) is True
        assert log == ["patched"] and calls.ops == [first]
    finally:
        del Slotted.on_complete
    third = Slotted(100, calls, 0)
    assert purgatory.try_complete_else_watch(third, ["k"]) is True
    assert log == ["patched"] and calls.ops == [first, third]


def test_hooks_of_a_class_with_getattribute_go_through_it(kit, purgatory):
    seen: list[str] = []

    class Watching(kit.Countdown):
        __slots__ = ()

        def __getattribute__(self, name: str) -> Any:
            if name in ("try_complete", "on_complete"):
                seen.append(name)
            return super().__getattribute__(name)

    calls = Calls()
    op = Watching(100, calls, 0)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert "try_complete" in seen and "on_complete" in seen
    assert calls.ops == [op]


def test_instance_attribute_on_a_class_overriding_nothing(kit, purgatory):
    class Plain(kit.Countdown):  # no __slots__: instances have a __dict__
        pass

    log: list[str] = []
    op = Plain(100, None, 0)
    op.on_complete = lambda: log.append("instance")
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert log == ["instance"]
    other = Plain(100, Calls(), 0)
    assert purgatory.try_complete_else_watch(other, ["k"]) is True
    assert log == ["instance"]


def test_classes_alternating_keep_their_own_hooks(kit, purgatory):
    class A(kit.Countdown):
        __slots__ = ()

    class B(kit.Countdown):
        __slots__ = ()

        def on_complete(self) -> None:
            log.append("B")

    log: list[str] = []
    calls = Calls()
    for i in range(6):
        cls = A if i % 2 == 0 else B
        assert purgatory.try_complete_else_watch(cls(100, calls, 0), [i]) is True
    assert log == ["B", "B", "B"] and len(calls.ops) == 3
    assert all(type(op) is A for op in calls.ops)


def test_hook_decision_is_cached_per_class(kit, purgatory):
    # The compiled core with a GIL decides once per class which hooks run in
    # C; a class whose version tag never counts would be decided on every
    # call (an MRO walk per hook: several times slower, and no test above
    # would notice).
    import sysconfig

    from tickwheel import _purgatory

    if (
        not kit.Countdown.__module__.startswith("tickwheel._purgatory")
        or kit.Countdown is not _purgatory.CountdownOperation
    ):
        pytest.skip("the decision cache is the compiled core's")
    # Free-threaded builds keep no cache (every hook of a Python class
    # goes through the attribute), whether the GIL is on or off.
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

    class Quiet(kit.Countdown):
        __slots__ = ()

    class Loud(kit.Countdown):
        __slots__ = ()

        def on_complete(self) -> None:
            pass

    for cls in (Quiet, Loud):
        assert purgatory.try_complete_else_watch(cls(100, None, 0), ["k"]) is True
    if free_threaded:
        assert _purgatory._hook_cached(Quiet) is None
        assert _purgatory._hook_cached(Loud) is None
        return
    assert _purgatory._hook_cached(Quiet) == 0
    assert _purgatory._hook_cached(Loud) == 2  # on_complete through the attribute
    Quiet.on_expiration = lambda self: None  # type: ignore[method-assign]
    assert _purgatory._hook_cached(Quiet) is None  # the class changed
    assert purgatory.try_complete_else_watch(Quiet(100, None, 0), ["k"]) is True
    assert _purgatory._hook_cached(Quiet) == 4


def test_hook_functions_are_called_as_the_method_lookup_would(kit, purgatory):
    # A Python hook that is a plain function is called directly (no method
    # lookup per call) on the compiled core with a GIL.  What runs must be
    # what the lookup finds, on every core: the class's own, an inherited
    # one, a replacement assigned later, and a staticmethod.
    import sysconfig

    from tickwheel import _purgatory

    compiled = kit.Countdown is getattr(_purgatory, "CountdownOperation", None)
    log: list[str] = []

    class Own(kit.Countdown):
        __slots__ = ()

        def on_complete(self) -> None:
            log.append(f"own {type(self).__name__}")

    class Heir(Own):
        __slots__ = ()

    class Static(kit.Countdown):
        __slots__ = ()
        on_complete = staticmethod(lambda: log.append("static"))

    for cls in (Own, Heir, Static, Own):
        assert purgatory.try_complete_else_watch(cls(100, None, 0), ["k"]) is True
    assert log == ["own Own", "own Heir", "static", "own Own"]
    if compiled and not sysconfig.get_config_var("Py_GIL_DISABLED"):
        own = Own.__dict__["on_complete"]
        assert _purgatory._hook_functions(Own) == (None, own, None, None)
        assert _purgatory._hook_functions(Heir) == (None, own, None, None)
        assert _purgatory._hook_functions(Static) == (None, None, None, None)
    log.clear()
    Own.on_complete = lambda self: log.append("replaced")  # type: ignore[method-assign]
    for cls in (Own, Heir):
        assert purgatory.try_complete_else_watch(cls(100, None, 0), ["k"]) is True
    assert log == ["replaced", "replaced"]
