"""The tickwheel event loop: timers of asyncio and uvloop on the wheel.

Each test runs on both base loops (asyncio's default loop class and
``uvloop.Loop``) and closes every loop it makes.  No wall-clock speed is
asserted; sleeps are a few milliseconds and only their order or their lower
bound (never early) is checked.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import math
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tickwheel import compat_asyncio as tw
from tickwheel._asyncio_loop import _TickwheelLoop

try:
    import uvloop
except ImportError:  # pragma: no cover (Windows: no uvloop)
    uvloop = None


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")

# Event loop policies are deprecated from 3.14 (removed in 3.16): there every
# use of one warns, asyncio's own and tw.EventLoopPolicy alike.
POLICIES_DEPRECATED = sys.version_info >= (3, 14)


def _warnings_of(use: Callable[[], object]) -> list[str]:
    """Run ``use``; the warnings it gave, as 'Category: message (file)'."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        use()
    return [
        f"{w.category.__name__}: {w.message} ({Path(w.filename).name})" for w in caught
    ]


def _policy_class() -> Any:
    """tw.EventLoopPolicy, taking the DeprecationWarning 3.14+ gives for it."""
    if not POLICIES_DEPRECATED:
        return tw.EventLoopPolicy
    with pytest.warns(DeprecationWarning, match="EventLoopPolicy' is deprecated"):
        return tw.EventLoopPolicy


@pytest.fixture
def loop(
    base: type[asyncio.AbstractEventLoop] | None,
) -> Iterator[asyncio.AbstractEventLoop]:
    lp = tw.new_event_loop(base)
    try:
        yield lp
    finally:
        lp.close()


def _now(loop: asyncio.AbstractEventLoop) -> float:
    # uvloop's time() is libuv's cached uv_now (updated once per iteration);
    # the wheel and its deadlines use the same clock read live.
    return time.monotonic() if uvloop and isinstance(loop, uvloop.Loop) else loop.time()


# -- the loop and its class ---------------------------------------------------------


def test_new_event_loop_subclasses_base(
    loop: asyncio.AbstractEventLoop, base: type[asyncio.AbstractEventLoop] | None
) -> None:
    reference = asyncio.new_event_loop()  # asyncio's default loop class
    reference.close()
    expected = base or type(reference)
    assert isinstance(loop, expected)
    assert isinstance(loop, _TickwheelLoop)
    # One class per base class, and a tickwheel class is taken as it is.
    other = tw.new_event_loop(type(loop))
    try:
        assert type(other) is type(loop)
        assert tw.new_event_loop.__module__ == "tickwheel._asyncio_loop"
    finally:
        other.close()
    # Only the timer methods (and set_debug/close) are overridden, and over
    # uvloop time(): the fresh clock the wheel reads, not libuv's cached one.
    for name in ("call_soon", "call_soon_threadsafe", "run_in_executor"):
        assert getattr(type(loop), name) is getattr(expected, name)
    if base is None:
        assert type(loop).time is expected.time
    else:
        assert type(loop).time is time.monotonic


def test_loop_wheel_is_get_wheel(loop: asyncio.AbstractEventLoop) -> None:
    wheel = tw.get_wheel(loop)
    assert wheel.loop is loop
    handle = loop.call_later(10, lambda: None)
    assert isinstance(handle, tw.TimerHandle)
    assert len(wheel) == 1
    assert handle.cancel() is True
    assert len(wheel) == 0


def test_call_later_and_call_at_run_on_the_wheel_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    fired: list[tuple[str, float, float]] = []
    wheel = tw.get_wheel(loop)

    def cb(name: str, when: float) -> None:
        fired.append((name, when, _now(loop)))
        if len(fired) == 3:
            loop.stop()

    now = loop.time()
    h2 = loop.call_later(0.02, cb, "b", now + 0.02)
    h1 = loop.call_at(now + 0.005, cb, "a", now + 0.005)
    h3 = loop.call_at(now + 0.03, cb, "c", now + 0.03)
    loop.call_later(0.01, cb, "x", 0).cancel()
    assert len(wheel) == 3
    assert h1.when() >= now + 0.005 and h2.when() >= now + 0.02
    assert h3.when() - (now + 0.03) <= 0.001 + 1e-9  # rounded up to the 1 ms tick
    loop.run_forever()
    assert [name for name, _, _ in fired] == ["a", "b", "c"]
    for name, when, at in fired:
        assert at >= when, f"{name} fired {when - at:.6f} s early"
    assert len(wheel) == 0
    assert not h1.cancelled() and h1.done


def _when_rounding_down(base: float) -> float:
    # A loop time whose product with 1e9 rounds below the exact one, so
    # that ceil(when * 1e9) is a nanosecond short, on a millisecond whose
    # float is below ``when`` (uvloop's ms-resolution clock plus 5 ms gave
    # one: 27243.54 + 0.005).  Such times exist only where the product's
    # ulp is at least twice ``when``'s ulp times 1e9, about half of each
    # binade (none in [33,000 s, 70,000 s), say), so the search moves the
    # base up by 5 % until it finds one: the test must not depend on how
    # long the machine has been up.
    from fractions import Fraction

    start = math.floor(base)
    for _ in range(400):
        for k in range(300):
            when = start + k / 1000 + 0.005
            short = math.ceil(when * 1e9)
            exact = math.ceil(Fraction(when) * 10**9)
            if short < exact and -(-short // 10**6) / 1000 < when:
                return when
        start = math.floor(start * 1.05) + 1
    raise AssertionError(f"no such time above {base}")  # pragma: no cover


@pytest.mark.parametrize("base", [1_000, 8_600, 34_340, 70_000, 2_500_000, 3e9])
def test_when_rounding_down_finds_a_time_from_any_base(base: float) -> None:
    # CI once ran at loop.time() == 34340 - 1000, where the old search
    # (10,000 ms from the base) found nothing.
    from fractions import Fraction

    when = _when_rounding_down(base)
    assert when >= base
    short = math.ceil(when * 1e9)
    assert short < math.ceil(Fraction(when) * 10**9)
    assert -(-short // 10**6) / 1000 < when


def test_call_at_never_reports_a_time_before_when(
    loop: asyncio.AbstractEventLoop,
) -> None:
    # asyncio's handle.when() is the `when` given; the wheel's is that
    # rounded up to its tick, and must never read before it (it did, by
    # 1 ulp, for about a third of the ms-resolution times).
    wheel = tw.get_wheel(loop)
    when = _when_rounding_down(math.floor(loop.time()) + 1_000)
    handles = [loop.call_at(when, lambda: None), wheel.call_at(when, lambda: None)]
    for h in handles:
        assert h.when() >= when and h._when >= when, (h.when(), h._when, when)
        h.cancel()
    assert len(wheel) == 0


def test_base_heap_holds_only_the_driver(loop: asyncio.AbstractEventLoop) -> None:
    wheel = tw.get_wheel(loop)

    async def main() -> int:
        tasks = [asyncio.ensure_future(asyncio.sleep(1 + i % 30)) for i in range(2000)]
        await asyncio.sleep(0)  # every task is now in its sleep
        pending = len(wheel)
        scheduled = getattr(loop, "_scheduled", None)
        if scheduled is not None:  # asyncio's heap; uvloop keeps it in libuv
            assert len([h for h in scheduled if not h.cancelled()]) == 1
            assert scheduled[0]._callback == wheel._fire
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return pending

    assert loop.run_until_complete(main()) == 2000
    assert len(wheel) == 0


def test_uvloop_call_at_goes_through_our_call_later() -> None:
    if uvloop is None:
        pytest.skip("uvloop is not installed")
    loop = tw.new_event_loop(uvloop.Loop)
    try:
        # uvloop's own call_at calls self.call_later: the wheel's driver must
        # still land on libuv, and the user's timers on the wheel.
        handle = loop.call_at(loop.time() + 5, lambda: None)
        assert isinstance(handle, tw.TimerHandle)
        driver = tw.get_wheel(loop)._driver
        assert driver is not None and not isinstance(driver, tw.TimerHandle)
        assert type(driver).__module__.startswith("uvloop")
    finally:
        loop.close()


def test_timer_methods_are_the_wheels_while_no_check_is_due(
    loop: asyncio.AbstractEventLoop,
) -> None:
    # While no check is due, loop.call_later/call_at are the wheel's C
    # methods (no Python frame); debug mode and a closed loop take the
    # checked methods of the class again.
    wheel = tw.get_wheel(loop)

    def fast() -> bool:
        return all(
            getattr(getattr(loop, name), "__self__", None) is wheel
            for name in ("call_later", "call_at")
        )

    assert fast()
    assert isinstance(loop.call_later(5, print), tw.TimerHandle)
    loop.set_debug(True)
    assert not fast()
    assert loop.call_later.__func__ is _TickwheelLoop.call_later  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="coroutines cannot be used with call_at"):
        loop.call_at(loop.time() + 1, asyncio.sleep)
    loop.set_debug(False)
    assert fast()
    loop.close()
    assert not fast()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_later(1, print)
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_at(1, print)


def test_subclass_overriding_call_later_keeps_its_own(
    base: type[asyncio.AbstractEventLoop] | None,
) -> None:
    seen: list[float] = []
    first = tw.new_event_loop(base)
    first.close()

    class Recording(type(first)):  # type: ignore[misc]
        def call_later(self, delay: float, *args: Any, **kwargs: Any) -> Any:
            seen.append(delay)
            return super().call_later(delay, *args, **kwargs)

    lp = Recording()
    try:
        handle = lp.call_later(3, print)
        # (uvloop's call_at, which arms the wheel's driver, calls call_later
        # too: seen[1:] is the driver's delay there.)
        assert seen[0] == 3 and isinstance(handle, tw.TimerHandle)
        # call_at is not overridden: it is still the wheel's.
        assert getattr(lp.call_at, "__self__", None) is tw.get_wheel(lp)
        assert handle.cancel()
    finally:
        lp.close()


def test_timer_methods_take_keywords_and_keep_when_exactly(
    loop: asyncio.AbstractEventLoop,
) -> None:
    fired: list[str] = []
    when = _now(loop) + 0.0123456789
    at = loop.call_at(when=when, callback=fired.append)
    assert at._when == pytest.approx(when, abs=1e-9)
    assert at.when() >= when  # rounded up to the tick, never early
    later = loop.call_later(delay=0.005, callback=fired.append)
    assert isinstance(later, tw.TimerHandle) and isinstance(at, tw.TimerHandle)
    at.cancel()
    later.cancel()
    # Equal deadlines run in the order they were scheduled (asyncio's heap).
    deadline = _now(loop) + 0.01
    for name in "abcde":
        loop.call_at(deadline, fired.append, name)
    past = loop.call_at(_now(loop) - 10, fired.append, "past")  # due at once
    assert past._when == pytest.approx(_now(loop) - 10, abs=0.05)
    loop.run_until_complete(asyncio.sleep(0.05))
    assert fired == ["past", "a", "b", "c", "d", "e"]
    assert len(tw.get_wheel(loop)) == 0


def test_sleep_wait_for_and_timeout_use_the_wheel(
    loop: asyncio.AbstractEventLoop,
) -> None:
    wheel = tw.get_wheel(loop)
    seen: list[int] = []

    async def watch() -> None:
        await asyncio.sleep(0)
        seen.append(len(wheel))

    async def main() -> tuple[float, str]:
        t0 = _now(loop)
        watcher = asyncio.ensure_future(watch())
        await asyncio.sleep(0.01)
        slept = _now(loop) - t0
        await watcher
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10), 0.005)
        result = await asyncio.wait_for(asyncio.sleep(0.001, "ok"), 10)
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(10):
                seen.append(len(wheel))
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.005):
                    await asyncio.sleep(10)
        return slept, result

    slept, result = loop.run_until_complete(main())
    assert slept >= 0.01
    assert result == "ok"
    assert seen[0] == 1  # the sleep(0.01) was on the wheel
    if sys.version_info >= (3, 11):
        assert seen[1] == 1  # the asyncio.timeout(10) deadline too
    assert len(wheel) == 0


def test_context_is_copied_or_given(loop: asyncio.AbstractEventLoop) -> None:
    seen: list[str] = []
    ctx = contextvars.copy_context()
    ctx.run(VAR.set, "given")

    def record() -> None:
        seen.append(VAR.get())
        VAR.set("changed by callback")

    async def main() -> None:
        VAR.set("task")
        done = loop.create_future()
        h1 = loop.call_later(0.001, record)
        h2 = loop.call_at(loop.time() + 0.001, record, context=ctx)
        h3 = loop.call_later(0.002, done.set_result, None)
        assert h1.get_context().get(VAR) == "task"
        assert h2.get_context() is ctx
        await done
        assert h3.done
        assert VAR.get() == "task"

    loop.run_until_complete(main())
    assert sorted(seen) == ["given", "task"]
    assert ctx.get(VAR) == "changed by callback"  # an explicit context is used as is


def test_exception_goes_to_the_exception_handler(
    loop: asyncio.AbstractEventLoop,
) -> None:
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda lp, ctx: errors.append(ctx))

    def boom() -> None:
        raise ZeroDivisionError("boom")

    handle = loop.call_later(0.001, boom)
    loop.call_later(0.003, loop.stop)
    loop.run_forever()
    assert len(errors) == 1
    assert isinstance(errors[0]["exception"], ZeroDivisionError)
    assert errors[0]["handle"] is handle


# -- asyncio's checks ------------------------------------------------------------------


def test_closed_loop_refuses_timers_and_cancels_pending(
    base: type[asyncio.AbstractEventLoop] | None,
) -> None:
    loop = tw.new_event_loop(base)
    wheel = tw.get_wheel(loop)
    handle = loop.call_later(10, print)
    loop.close()
    assert loop.is_closed() and wheel.closed
    assert handle.cancelled()
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_later(1, print)
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        loop.call_at(loop.time() + 1, print)
    loop.close()  # idempotent, as asyncio's


def test_close_running_loop_raises_and_keeps_timers(
    loop: asyncio.AbstractEventLoop,
) -> None:
    handle = loop.call_later(10, print)

    async def main() -> None:
        with pytest.raises(RuntimeError):
            loop.close()

    loop.run_until_complete(main())
    assert not loop.is_closed() and handle.pending


def test_debug_mode_checks_thread_and_callback(
    loop: asyncio.AbstractEventLoop,
) -> None:
    loop.set_debug(True)
    errors: list[BaseException] = []

    def other_thread() -> None:
        for method, arg in ((loop.call_later, 1), (loop.call_at, loop.time() + 1)):
            try:
                method(arg, print)
            except RuntimeError as exc:
                errors.append(exc)
        loop.call_soon_threadsafe(loop.stop)

    async def coro() -> None:
        pass

    with pytest.raises(
        TypeError, match=r"coroutines cannot be used with call_later\(\)"
    ):
        loop.call_later(1, coro)
    with pytest.raises(TypeError, match=r"coroutines cannot be used with call_at\(\)"):
        loop.call_at(1, coro)
    loop.call_soon(threading.Thread(target=other_thread).start)
    loop.run_forever()
    assert len(errors) == 2
    assert all("Non-thread-safe operation" in str(e) for e in errors)
    # Debug off again: the fast path, and the timers still fire.
    loop.set_debug(False)
    fut = loop.create_future()
    loop.call_later(0.001, fut.set_result, 1)
    assert loop.run_until_complete(fut) == 1


def test_debug_mode_arms_the_driver_without_a_traceback(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """In debug mode asyncio's handles record where they were made (a stack
    walk of tens of microseconds).  The wheel's driver handle, re-armed after
    every batch of timers, does not: its traceback would show only the
    wheel's frames, and the walk delayed debug-mode I/O behind the timers
    (websockets' close tests lost their race to their close timeout)."""
    loop.set_debug(True)
    fired: list[float] = []

    async def main() -> None:
        loop.call_later(0.002, fired.append, 1.0)
        driver = tw.get_wheel(loop)._driver
        assert driver is not None
        if isinstance(loop, asyncio.BaseEventLoop):
            assert driver._source_traceback is None  # type: ignore[attr-defined]
            # A handle the loop makes itself still records it.
            assert loop.call_soon(print)._source_traceback  # type: ignore[attr-defined]
        assert loop.get_debug()
        await asyncio.sleep(0.005)

    loop.run_until_complete(main())
    assert fired == [1.0] and loop.get_debug()


def test_threadsafe_entry_schedules_timer(loop: asyncio.AbstractEventLoop) -> None:
    fut = loop.create_future()

    def in_loop() -> None:
        loop.call_later(0.001, fut.set_result, threading.get_ident())

    t = threading.Thread(target=loop.call_soon_threadsafe, args=(in_loop,))
    t.start()
    t.join()
    assert loop.run_until_complete(fut) == threading.get_ident()


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda lp: lp.call_later("1", print), TypeError, "delay must be a number"),
        (lambda lp: lp.call_later(None, print), TypeError, "delay must be a number"),
        (lambda lp: lp.call_later(float("nan"), print), ValueError, "delay must not"),
        (lambda lp: lp.call_later(1, 42), TypeError, "callback must be callable"),
        (lambda lp: lp.call_at(None, print), TypeError, "when must be a number"),
        (lambda lp: lp.call_at(float("nan"), print), ValueError, "when must not"),
        (lambda lp: lp.call_at(1, print, context=1), TypeError, "context must be"),
    ],
)
def test_bad_timer_arguments_raise_naming_them(
    loop: asyncio.AbstractEventLoop, call: Any, exc: type[Exception], match: str
) -> None:
    with pytest.raises(exc, match=match):
        call(loop)
    assert len(tw.get_wheel(loop)) == 0


@pytest.mark.parametrize("bad", [42, "uvloop.Loop", object, asyncio.Future])
def test_bad_loop_class_raises_naming_it(bad: Any) -> None:
    with pytest.raises(TypeError, match="loop_class must be an asyncio"):
        tw.new_event_loop(bad)
    policy_class = _policy_class()
    with pytest.raises(TypeError, match="loop_class must be"):
        policy_class(loop_class=bad)
    coro = asyncio.sleep(0)
    with pytest.raises(TypeError, match="loop_class must be"):
        tw.run(coro, loop_class=bad)
    coro.close()


def test_run_refuses_non_coroutine_and_nested_use() -> None:
    with pytest.raises(ValueError, match="a coroutine was expected"):
        tw.run(42)  # type: ignore[arg-type]

    async def nested() -> None:
        coro = asyncio.sleep(0)
        try:
            with pytest.raises(RuntimeError, match="running event loop"):
                tw.run(coro)
        finally:
            coro.close()

    tw.run(nested())


# -- the ways in: run, loop_factory, policy --------------------------------------------


async def _loop_kind() -> tuple[type[Any], bool, bool]:
    loop = asyncio.get_running_loop()
    await asyncio.sleep(0.001)
    return type(loop), loop.get_debug(), isinstance(loop, _TickwheelLoop)


def test_run_returns_result_and_closes_loop(
    base: type[asyncio.AbstractEventLoop] | None,
) -> None:
    made: list[asyncio.AbstractEventLoop] = []

    async def main() -> str:
        made.append(asyncio.get_running_loop())
        return (await _loop_kind())[2] and "done" or "not tickwheel"

    assert tw.run(main(), loop_class=base) == "done"
    assert made[0].is_closed()
    cls, debug, ok = tw.run(_loop_kind(), debug=True, loop_class=base)
    assert ok and debug
    assert issubclass(cls, base or asyncio.AbstractEventLoop)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.Runner is 3.11+")
def test_runner_loop_factory(base: type[asyncio.AbstractEventLoop] | None) -> None:
    factory = tw.new_event_loop if base is None else lambda: tw.new_event_loop(base)
    with asyncio.Runner(loop_factory=factory) as runner:  # type: ignore[attr-defined]
        assert runner.run(_loop_kind())[2]
    if sys.version_info >= (3, 12):
        assert asyncio.run(_loop_kind(), loop_factory=factory)[2]  # type: ignore[call-arg]


@pytest.mark.skipif(sys.version_info < (3, 13), reason="loop_factory is 3.13+")
def test_isolated_test_case_loop_factory(
    base: type[asyncio.AbstractEventLoop] | None,
) -> None:
    import unittest

    kinds: list[tuple[type[Any], bool, bool]] = []

    class Case(unittest.IsolatedAsyncioTestCase):
        loop_factory = staticmethod(lambda: tw.new_event_loop(base))

        async def test_kind(self) -> None:
            kinds.append(await _loop_kind())

    result = unittest.TestResult()
    Case("test_kind").run(result)
    assert result.wasSuccessful(), result.errors + result.failures
    assert len(kinds) == 1 and kinds[0][2]  # a tickwheel loop
    assert kinds[0][1]  # in debug mode, as IsolatedAsyncioTestCase asks


def test_policy_makes_tickwheel_loops(
    base: type[asyncio.AbstractEventLoop] | None,
) -> None:
    # Policies still work on 3.10-3.15; on 3.14+ each policy call warns
    # (checked against asyncio's own policy in the next test).
    with warnings.catch_warnings():
        if POLICIES_DEPRECATED:
            warnings.filterwarnings(
                "ignore", ".* is deprecated and slated for removal in Python 3.16"
            )
        policy = tw.EventLoopPolicy(loop_class=base)
        asyncio.set_event_loop_policy(policy)
    try:
        assert asyncio.run(_loop_kind())[2]
        loop = asyncio.new_event_loop()
        try:
            assert type(loop) is policy.loop_class
            assert isinstance(loop, base or asyncio.AbstractEventLoop)
        finally:
            loop.close()
    finally:
        with warnings.catch_warnings():
            if POLICIES_DEPRECATED:
                warnings.filterwarnings("ignore", category=DeprecationWarning)
            asyncio.set_event_loop_policy(None)


def test_policy_warns_exactly_as_asyncio_policy(
    base: type[asyncio.AbstractEventLoop] | None,
) -> None:
    # The same program with asyncio's default policy and with tickwheel's:
    # the same warnings (none before 3.14), with the policy's name swapped.
    def with_asyncio() -> None:
        policy = asyncio.DefaultEventLoopPolicy()
        asyncio.set_event_loop_policy(policy)
        asyncio.run(_loop_kind())
        asyncio.new_event_loop().close()
        asyncio.set_event_loop_policy(None)

    def with_tickwheel() -> None:
        policy = tw.EventLoopPolicy(loop_class=base)
        asyncio.set_event_loop_policy(policy)
        asyncio.run(_loop_kind())
        asyncio.new_event_loop().close()
        asyncio.set_event_loop_policy(None)

    def rename(messages: list[str]) -> list[str]:
        old = "asyncio.DefaultEventLoopPolicy"
        return [w.replace(old, f"{tw.__name__}.EventLoopPolicy") for w in messages]

    want = _warnings_of(with_asyncio)
    got = _warnings_of(with_tickwheel)
    assert got == rename(want)

    # A from-import: asyncio is a package, whose from-import looks the name
    # up twice (importlib's _handle_fromlist, then IMPORT_FROM), so it gives
    # the same warning twice; compat_asyncio is a module and gives it once.
    def import_asyncio() -> None:
        from asyncio import DefaultEventLoopPolicy  # noqa: F401

    def import_tickwheel() -> None:
        from tickwheel.compat_asyncio import EventLoopPolicy  # noqa: F401

    want = _warnings_of(import_asyncio)
    got = _warnings_of(import_tickwheel)
    assert got == rename(sorted(set(want)))
    assert ("EventLoopPolicy" in tw.__all__) == (
        "DefaultEventLoopPolicy" in asyncio.__all__
    )
    if POLICIES_DEPRECATED:
        here = Path(__file__).name
        assert _warnings_of(with_tickwheel) == [
            f"DeprecationWarning: '{name}' is deprecated and slated for removal "
            f"in Python 3.16 ({here})"
            for name in (
                "tickwheel.compat_asyncio.EventLoopPolicy",
                "asyncio.set_event_loop_policy",
                "asyncio.set_event_loop_policy",
            )
        ]
        assert len(got) == 1
    else:
        assert want == []


def test_loop_and_wheel_are_collected() -> None:
    loop = tw.new_event_loop()
    loop.run_until_complete(asyncio.sleep(0.001))
    loop.call_later(10, print)
    ref = weakref.ref(loop)
    wheel_ref = weakref.ref(tw.get_wheel(loop))
    loop.close()
    del loop
    gc.collect()
    assert ref() is None and wheel_ref() is None


def test_callback_scheduling_earlier_timer_rearms(
    loop: asyncio.AbstractEventLoop,
) -> None:
    order: list[str] = []

    def note(what: str) -> None:
        order.append(what)
        if len(order) == 3:
            loop.stop()

    def first() -> None:
        order.append("first")
        loop.call_later(0, note, "zero-delay")
        loop.call_later(-1, note, "negative")

    loop.call_later(0.002, first)
    # Stopped by the last callback; the deadline only ends a failing run (a
    # fixed 20 ms stop timer fired together with `first` on a loaded host).
    deadline = loop.call_later(10, loop.stop)
    loop.run_forever()
    deadline.cancel()
    assert order[0] == "first" and sorted(order[1:]) == ["negative", "zero-delay"]


def test_loop_handles_postpone(loop: asyncio.AbstractEventLoop) -> None:
    fired: list[float] = []
    wheel = tw.get_wheel(loop)
    # What a heartbeat does on each message: move the pending timer.
    handle = loop.call_later(30, lambda: fired.append(_now(loop)))
    t0 = _now(loop)
    assert handle.postpone(0.005) is True
    assert len(wheel) == 1 and handle.when() < t0 + 1
    loop.call_later(0.03, loop.stop)
    loop.run_forever()
    assert len(fired) == 1 and fired[0] >= t0 + 0.005
    assert handle.postpone(1) is False  # it ran


# The asyncio layers, lowest first: each may import only the ones below it,
# so that no two of them import each other.
ASYNCIO_LAYERS = [
    "_impl",
    "_asyncio_time",
    "_asyncio_handles",
    "_asyncio_wheel",
    "_asyncio_loop",
    "compat_asyncio",
]


def _tickwheel_imports(module: str) -> set[str]:
    """Every tickwheel module ``module`` imports, at any depth of its code."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(f"tickwheel.{module}")
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            names = [node.module] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in getattr(node, "names", []) if "." in a.name]
            for name in filter(None, names):
                if name.startswith("tickwheel."):
                    found.add(name.split(".")[1])
    return found


@pytest.mark.parametrize("module", ASYNCIO_LAYERS[1:])
def test_asyncio_layers_import_only_downward(module: str) -> None:
    below = set(ASYNCIO_LAYERS[: ASYNCIO_LAYERS.index(module)])
    imported = _tickwheel_imports(module) & set(ASYNCIO_LAYERS)
    assert imported <= below, f"{module} imports {sorted(imported - below)}"


def test_asyncio_public_classes_name_their_public_module() -> None:
    for name in ("Timeout", "TimerHandle", "TimerWheel", "get_wheel", "timeout"):
        assert getattr(tw, name).__module__ == "tickwheel.compat_asyncio", name


_VAR: contextvars.ContextVar[int] = contextvars.ContextVar("_VAR")


def test_core_loop_paths_call_only_what_the_layer_registered() -> None:
    # TimerCore._loop_call_later/_loop_call_at call nothing of the asyncio
    # layer above the core but the functions _use_loop_handles was given:
    # on a plain TimerCore (no call_later of its own) they reach these.
    from tickwheel import _asyncio_wheel, _impl

    core = _impl.core
    calls: list[tuple[str, object, tuple[Any, ...], dict[str, Any]]] = []

    class Plain(core._LoopHandle):  # type: ignore[misc,name-defined]
        __slots__ = ()

    class WithContext(core._LoopHandle):  # type: ignore[misc,name-defined]
        __slots__ = ("_context",)

    def recorder(name: str, result: object) -> Callable[..., object]:
        def record(wheel: object, *args: Any, **kwargs: Any) -> object:
            calls.append((name, wheel, args, kwargs))
            return result

        return record

    wheel = _impl.TimerCore(manual=True)
    ctx = contextvars.copy_context()
    core._use_loop_handles(
        Plain,
        WithContext,
        recorder("later", "L"),
        recorder("at", "A"),
        recorder("share", ctx),
    )
    try:
        assert wheel._loop_call_later(0.5, "not callable") == "L"
        assert wheel._loop_call_at(1.5, print, 7, context=ctx) == "A"
        assert calls == [
            ("later", wheel, (0.5, "not callable"), {}),
            ("at", wheel, (1.5, print, 7), {"context": ctx}),
        ]
        if _impl.USE_EXTENSIONS:  # the compiled paths make the handle in C
            del calls[:]
            # Made in an empty context, and in one that holds a variable.
            plain = contextvars.Context().run(wheel._loop_call_later, 0.5, print)
            shared = contextvars.Context().run(
                lambda: (_VAR.set(1), wheel._loop_call_later(0.5, print))[1]
            )
            assert (type(plain), type(shared), len(wheel)) == (Plain, WithContext, 2)
            assert [(name, w) for name, w, _, _ in calls] == [("share", wheel)]
            assert shared._context is ctx
        with pytest.raises(TypeError, match="must be callable, got None"):
            core._use_loop_handles(Plain, WithContext, print, print, None)
    finally:
        wheel_cls = _asyncio_wheel.TimerWheel
        core._use_loop_handles(
            _asyncio_wheel.TimerHandle,
            _asyncio_wheel._ContextTimerHandle,
            wheel_cls.call_later,
            wheel_cls.call_at,
            wheel_cls._share,
        )
