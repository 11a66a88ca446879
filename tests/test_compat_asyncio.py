"""Contract tests: one body run against asyncio's timers and tickwheel's.

Each test in :class:`TestAsyncioContract` runs once with the stdlib
(``loop.call_later``/``call_at``, ``asyncio.timeout``/``timeout_at``) and
once with :mod:`tickwheel.compat_asyncio` (the uvloop ``tests/test_base.py``
pattern), on a *virtual-time* event loop whose selector jumps the clock
forward instead of sleeping, so timers are deterministic and instant.  A few
real-time checks on the default loop and on uvloop are marked ``slow``.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import selectors
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tickwheel import _asyncio_wheel
from tickwheel import compat_asyncio as tw

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


class _FastForwardSelector(selectors.DefaultSelector):
    """A selector that advances its loop's virtual clock instead of waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualTimeLoop | None = None

    def select(self, timeout: float | None = None) -> list[Any]:
        events = super().select(0)
        if not events and timeout and self.loop is not None:
            self.loop.now += timeout
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time (our wheel then uses loop.time())."""

    def __init__(self) -> None:
        selector = _FastForwardSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = 1000.0

    def time(self) -> float:
        return self.now


def run(
    coro: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop | None = None
) -> Any:
    loop = loop if loop is not None else VirtualTimeLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


class Stdlib:
    name = "stdlib"
    reports_cancel_after_run = True  # asyncio sets cancelled() even after the run

    @staticmethod
    def call_later(delay: float, cb: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return asyncio.get_running_loop().call_later(delay, cb, *args, **kw)

    @staticmethod
    def call_at(when: float, cb: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return asyncio.get_running_loop().call_at(when, cb, *args, **kw)

    # asyncio.timeout is new in 3.11; older Pythons test tickwheel's alone.
    timeout = staticmethod(getattr(asyncio, "timeout", None))
    timeout_at = staticmethod(getattr(asyncio, "timeout_at", None))


class Tickwheel:
    name = "tickwheel"
    reports_cancel_after_run = False  # documented deviation
    call_later = staticmethod(tw.call_later)
    call_at = staticmethod(tw.call_at)
    timeout = staticmethod(tw.timeout)
    timeout_at = staticmethod(tw.timeout_at)


@pytest.fixture(params=[Stdlib, Tickwheel], ids=["stdlib", "tickwheel"])
def impl(request: pytest.FixtureRequest) -> Any:
    uses_timeout = "timeout" in request.node.name or "real_loops" in request.node.name
    if request.param.timeout is None and uses_timeout:
        pytest.skip("asyncio.timeout needs Python 3.11")
    return request.param


async def spin(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


class TestAsyncioContract:
    def test_asyncio_call_later_runs_in_deadline_order(self, impl: Any) -> None:
        async def main() -> list[str]:
            out: list[str] = []
            impl.call_later(0.003, out.append, "c")
            impl.call_later(0.001, out.append, "a")
            impl.call_later(0.002, out.append, "b")
            impl.call_later(0.250, out.append, "d")
            await asyncio.sleep(0.3)
            return out

        assert run(main()) == ["a", "b", "c", "d"]

    def test_asyncio_never_early(self, impl: Any) -> None:
        async def main() -> list[tuple[float, float]]:
            loop = asyncio.get_running_loop()
            seen: list[tuple[float, float]] = []
            for delay in (0.0004, 0.0015, 0.02, 0.7, 9.0):
                when = loop.time() + delay
                impl.call_later(delay, lambda w=when: seen.append((w, loop.time())))
            await asyncio.sleep(10)
            return seen

        seen = run(main())
        assert len(seen) == 5
        assert all(fired >= when - 1e-9 for when, fired in seen)

    def test_asyncio_cancel_before_fire(self, impl: Any) -> None:
        async def main() -> tuple[list[str], bool, bool]:
            out: list[str] = []
            h = impl.call_later(0.01, out.append, "x")
            before = h.cancelled()
            h.cancel()
            await asyncio.sleep(0.05)
            return out, before, h.cancelled()

        assert run(main()) == ([], False, True)

    def test_asyncio_cancel_after_fire_has_no_effect(self, impl: Any) -> None:
        async def main() -> tuple[list[str], bool]:
            out: list[str] = []
            h = impl.call_later(0.001, out.append, "x")
            await asyncio.sleep(0.05)
            h.cancel()
            h.cancel()
            await asyncio.sleep(0.05)
            return out, h.cancelled()

        out, cancelled = run(main())
        assert out == ["x"]
        # Deviation: asyncio flags the handle even though nothing was stopped.
        assert cancelled is impl.reports_cancel_after_run

    def test_asyncio_nonpositive_delay_runs_next_iteration(self, impl: Any) -> None:
        async def main() -> tuple[list[str], list[str]]:
            out: list[str] = []
            impl.call_later(-1, out.append, "neg")
            impl.call_later(0, out.append, "zero")
            now = list(out)
            await spin()
            return now, out

        assert run(main()) == ([], ["neg", "zero"])

    def test_asyncio_call_at_and_when(self, impl: Any) -> None:
        async def main() -> tuple[float, float, list[str]]:
            loop = asyncio.get_running_loop()
            out: list[str] = []
            when = loop.time() + 0.0105
            h = impl.call_at(when, out.append, "at")
            await asyncio.sleep(0.02)
            return when, h.when(), out

        when, got, out = run(main())
        assert out == ["at"]
        # asyncio: exactly `when`; tickwheel: rounded up to the 1 ms tick.
        assert when <= got <= when + 0.001 + 1e-9

    def test_asyncio_callbacks_run_in_loop_thread(self, impl: Any) -> None:
        async def main() -> tuple[int, list[int]]:
            idents: list[int] = []
            impl.call_later(0.001, lambda: idents.append(threading.get_ident()))
            impl.call_later(0.5, lambda: idents.append(threading.get_ident()))
            await asyncio.sleep(1)
            return threading.get_ident(), idents

        ident, idents = run(main())
        assert idents == [ident, ident]

    def test_asyncio_callbacks_run_in_their_context(self, impl: Any) -> None:
        async def main() -> tuple[list[str], str]:
            seen: list[str] = []

            def cb(tag: str) -> None:
                seen.append(f"{tag}:{VAR.get()}")
                VAR.set("changed by " + tag)

            VAR.set("a")
            impl.call_later(0.001, cb, "one")
            impl.call_later(0.002, cb, "two")  # same snapshot: must not see "one"'s set
            VAR.set("b")
            impl.call_later(0.003, cb, "three")
            explicit = contextvars.Context()
            impl.call_later(0.004, cb, "four", context=explicit)
            await asyncio.sleep(0.01)
            seen.append(f"explicit after:{explicit[VAR]}")
            return seen, VAR.get()

        seen, current = run(main())
        assert seen == [
            "one:a",
            "two:a",
            "three:b",
            "four:unset",
            "explicit after:changed by four",
        ]
        assert current == "b"

    def test_asyncio_callback_exception_goes_to_handler_and_loop_goes_on(
        self, impl: Any
    ) -> None:
        async def main() -> tuple[list[dict[str, Any]], list[str]]:
            loop = asyncio.get_running_loop()
            reported: list[dict[str, Any]] = []
            loop.set_exception_handler(lambda lp, ctx: reported.append(ctx))
            out: list[str] = []

            def boom() -> None:
                raise ZeroDivisionError("boom")

            impl.call_later(0.001, boom)
            impl.call_later(0.001, out.append, "same tick")
            impl.call_later(0.002, out.append, "later")
            await asyncio.sleep(0.01)
            return reported, out

        reported, out = run(main())
        assert out == ["same tick", "later"]
        assert len(reported) == 1
        assert isinstance(reported[0]["exception"], ZeroDivisionError)
        assert reported[0]["message"].startswith("Exception in callback")

    def test_asyncio_timeout_raises_timeout_error(self, impl: Any) -> None:
        async def main() -> tuple[bool, bool, float, float]:
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(TimeoutError):
                async with impl.timeout(0.05) as cm:
                    assert not cm.expired()
                    await asyncio.sleep(10)
            return cm.expired(), cm.when() == start + 0.05, loop.time() - start, 0.05

        expired, exact_when, elapsed, delay = run(main())
        assert expired and exact_when
        assert delay - 1e-9 <= elapsed < 1

    def test_asyncio_timeout_not_reached(self, impl: Any) -> None:
        async def main() -> tuple[bool, str]:
            async with impl.timeout(1) as cm:
                await asyncio.sleep(0.01)
            await asyncio.sleep(2)  # the cancelled deadline must not fire later
            return cm.expired(), repr(cm)

        assert run(main()) == (False, "<Timeout [finished]>")

    def test_asyncio_timeout_none_and_reschedule(self, impl: Any) -> None:
        async def main() -> list[Any]:
            loop = asyncio.get_running_loop()
            log: list[Any] = []
            async with impl.timeout(None) as cm:
                log.append(cm.when())
                await asyncio.sleep(0.01)
                cm.reschedule(loop.time() + 0.5)
                await asyncio.sleep(0.2)
                cm.reschedule(None)
                await asyncio.sleep(1)
            log.append(cm.expired())
            start = loop.time()
            with pytest.raises(TimeoutError):
                async with impl.timeout(0.01) as cm2:
                    cm2.reschedule(cm2.when() + 0.3)  # extend
                    await asyncio.sleep(5)
            log.append(round(loop.time() - start, 3))
            with pytest.raises(RuntimeError, match="Cannot change state"):
                cm2.reschedule(None)
            fresh = impl.timeout(1)
            with pytest.raises(RuntimeError, match="has not been entered"):
                fresh.reschedule(None)
            return log

        log = run(main())
        assert log[:2] == [None, False]
        assert 0.31 <= log[2] <= 0.312

    def test_asyncio_timeout_at(self, impl: Any) -> None:
        async def main() -> float:
            loop = asyncio.get_running_loop()
            when = loop.time() + 0.2
            with pytest.raises(TimeoutError):
                async with impl.timeout_at(when):
                    await asyncio.sleep(10)
            return loop.time() - when

        assert 0 <= run(main()) < 0.01

    def test_asyncio_timeout_nonpositive_expires_at_first_await(
        self, impl: Any
    ) -> None:
        async def main() -> list[str]:
            log: list[str] = []
            with pytest.raises(TimeoutError):
                async with impl.timeout(-1):
                    log.append("entered")
                    await asyncio.sleep(1)
                    log.append("not reached")
            return log

        assert run(main()) == ["entered"]

    @pytest.mark.parametrize("how", ["timeout(0)", "timeout(-11)", "timeout_at(past)"])
    def test_asyncio_timeout_past_deadline_fires_before_task_resumes(
        self, impl: Any, how: str
    ) -> None:
        # A deadline at or before loop.time() goes through
        # loop.call_soon, so even `await asyncio.sleep(0)` is interrupted.
        async def main() -> tuple[bool, list[str]]:
            loop = asyncio.get_running_loop()
            cm = {
                "timeout(0)": lambda: impl.timeout(0),
                "timeout(-11)": lambda: impl.timeout(-11),
                "timeout_at(past)": lambda: impl.timeout_at(loop.time() - 1),
            }[how]()
            log: list[str] = []
            with pytest.raises(TimeoutError):
                async with cm:
                    await asyncio.sleep(0)
                    log.append("resumed")
            return cm.expired(), log

        assert run(main()) == (True, [])

    def test_asyncio_timeout_past_deadline_block_without_await(self, impl: Any) -> None:
        # The call_soon'd expiry of a past deadline must be withdrawn when the
        # block exits before it ran: no late cancel of the task, no loop error.
        async def main() -> tuple[bool, bool, list[Any]]:
            loop = asyncio.get_running_loop()
            errors: list[Any] = []
            loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
            async with impl.timeout(0) as cm:
                pass
            await spin()
            task = asyncio.current_task()
            assert task is not None
            cancelling = getattr(task, "cancelling", lambda: 0)()  # 3.11+
            return cm.expired(), cancelling > 0, errors

        assert run(main()) == (False, False, [])

    def test_asyncio_timeout_reschedule_to_past_deadline(self, impl: Any) -> None:
        async def main() -> tuple[bool, list[str], float]:
            loop = asyncio.get_running_loop()
            log: list[str] = []
            with pytest.raises(TimeoutError):
                async with impl.timeout(10) as cm:
                    await asyncio.sleep(0)
                    cm.reschedule(loop.time())
                    await asyncio.sleep(0)
                    log.append("resumed")
            return cm.expired(), log, loop.time() - cm.when()

        expired, log, late = run(main())
        assert (expired, log) == (True, [])
        assert late == 0  # the virtual clock did not move: no timer was waited for

    def test_asyncio_timeout_reschedule_past_then_future_cancels_the_soon(
        self, impl: Any
    ) -> None:
        async def main() -> bool:
            loop = asyncio.get_running_loop()
            async with impl.timeout(None) as cm:
                cm.reschedule(loop.time() - 1)
                cm.reschedule(loop.time() + 10)
                await spin()
            return cm.expired()

        assert run(main()) is False

    def test_asyncio_timeout_cancelled_error_subclass(self, impl: Any) -> None:
        # 3.11/3.12 convert only CancelledError itself, 3.13+ any subclass:
        # the drop-in follows the running Python, as the stdlib does.
        class MyCancelled(asyncio.CancelledError):
            pass

        async def main() -> str:
            try:
                async with impl.timeout(0.01):
                    try:
                        await asyncio.sleep(1)
                    except asyncio.CancelledError:
                        raise MyCancelled from None
            except TimeoutError:
                return "TimeoutError"
            except MyCancelled:
                return "MyCancelled"
            return "no exception"

        expected = "TimeoutError" if sys.version_info >= (3, 13) else "MyCancelled"
        assert run(main()) == expected

    def test_asyncio_timeout_error_is_both_timeout_errors(self, impl: Any) -> None:
        # One class since 3.11; on 3.10 tickwheel raises a subclass of
        # both, so `except asyncio.TimeoutError` (async-timeout, wait_for)
        # and `except TimeoutError` (3.11 code) both catch it.
        async def main() -> BaseException:
            try:
                async with impl.timeout(0.01):
                    await asyncio.sleep(1)
            except BaseException as exc:
                return exc
            raise AssertionError("no timeout")

        err = run(main())
        assert isinstance(err, TimeoutError)
        assert isinstance(err, asyncio.TimeoutError)

    def test_asyncio_timeout_cancels_only_the_task_it_wraps(self, impl: Any) -> None:
        async def main() -> tuple[str, str]:
            async def limited() -> str:
                try:
                    async with impl.timeout(0.05):
                        await asyncio.sleep(10)
                except TimeoutError:
                    return "timed out"
                return "finished"

            async def bystander() -> str:
                await asyncio.sleep(0.2)
                return "untouched"

            return tuple(await asyncio.gather(limited(), bystander()))  # type: ignore[return-value]

        assert run(main()) == ("timed out", "untouched")

    def test_asyncio_nested_timeouts(self, impl: Any) -> None:
        async def main() -> list[str]:
            log: list[str] = []
            with pytest.raises(TimeoutError):
                async with impl.timeout(0.5) as outer:
                    try:
                        async with impl.timeout(0.1) as inner:
                            await asyncio.sleep(10)
                    except TimeoutError:
                        log.append(f"inner expired={inner.expired()}")
                    assert not outer.expired()
                    try:
                        async with impl.timeout(5) as inner2:
                            await asyncio.sleep(10)
                    except TimeoutError:
                        log.append("inner2 must not see the outer deadline")
                    finally:  # the outer deadline's CancelledError passes through
                        log.append(f"inner2 expired={inner2.expired()}")
            log.append(f"outer expired={outer.expired()}")
            return log

        assert run(main()) == [
            "inner expired=True",
            "inner2 expired=False",
            "outer expired=True",
        ]

    def test_asyncio_outside_cancel_wins_over_timeout(self, impl: Any) -> None:
        async def main() -> str:
            async def victim() -> None:
                async with impl.timeout(0.1):
                    await asyncio.sleep(10)

            task = asyncio.ensure_future(victim())
            loop = asyncio.get_running_loop()
            # Cancelled from outside in the same tick the deadline fires.
            loop.call_at(loop.time() + 0.1, task.cancel)
            try:
                await task
            except asyncio.CancelledError:
                return "CancelledError"
            except TimeoutError:
                return "TimeoutError"
            return "no error"

        result = run(main())
        if sys.version_info >= (3, 11):  # Task.uncancel()
            assert result == "CancelledError"
        else:
            # Python < 3.11 has no Task.uncancel() (the documented deviation):
            # if the deadline fires first, the outside cancel becomes
            # TimeoutError; if the cancel comes first (asyncio's heap is not
            # rounded up to the tick), it wins.
            assert result in ("CancelledError", "TimeoutError")

    def test_asyncio_timeout_misuse(self, impl: Any) -> None:
        async def main() -> None:
            cm = impl.timeout(1)
            async with cm:
                pass
            with pytest.raises(RuntimeError, match="already been entered"):
                async with cm:
                    pass

        run(main())
        loop = VirtualTimeLoop()

        async def outside_task() -> None:
            cm = impl.timeout(1)
            with pytest.raises(RuntimeError, match="inside a task"):
                await cm.__aenter__()

        try:
            # Drive the coroutine without a task: current_task() is None.
            asyncio.events._set_running_loop(loop)
            coro = outside_task()
            with pytest.raises(StopIteration):
                coro.send(None)
        finally:
            asyncio.events._set_running_loop(None)
            loop.close()

    @pytest.mark.slow
    @pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
    def test_asyncio_real_loops(self, impl: Any, loop_kind: str) -> None:
        if loop_kind == "uvloop":
            uvloop = pytest.importorskip("uvloop")
            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        else:
            loop = asyncio.new_event_loop()

        async def main() -> tuple[list[str], float]:
            lp = asyncio.get_running_loop()
            out: list[str] = []
            VAR.set("ctx")
            start = lp.time()
            impl.call_later(0.02, lambda: out.append("b:" + VAR.get()))
            impl.call_later(0.01, lambda: out.append("a:" + VAR.get()))
            impl.call_later(0.01, out.append, "cancelled").cancel()
            with pytest.raises(TimeoutError):
                async with impl.timeout(0.03):
                    await asyncio.sleep(5)
            return out, lp.time() - start

        out, elapsed = run(main(), loop)
        assert out == ["a:ctx", "b:ctx"]
        assert 0.03 - 1e-6 <= elapsed < 2


# -- tickwheel only ------------------------------------------------------------------


def _wheel_handles(loop: asyncio.AbstractEventLoop) -> int:
    # Live driver handles of the wheel, in the timer heap or the ready queue.
    scheduled = list(getattr(loop, "_scheduled")) + list(getattr(loop, "_ready"))
    return sum(
        1
        for h in scheduled
        if not h.cancelled()
        and getattr(h._callback, "__func__", None) is tw.TimerWheel._fire
    )


def test_wheel_uses_one_loop_handle_for_many_timers() -> None:
    async def main() -> tuple[int, int, int, int]:
        loop = asyncio.get_running_loop()
        handles = [
            tw.call_later(0.001 * (i % 200 + 1), lambda: None) for i in range(2000)
        ]
        armed = _wheel_handles(loop)
        wheel = tw.get_wheel()
        pending = len(wheel)
        for h in handles[::2]:
            h.cancel()
        after_cancel = len(wheel)
        await asyncio.sleep(0.5)
        wheel._check()
        return armed, pending, after_cancel, len(wheel)

    assert run(main()) == (1, 2000, 1000, 0)


def test_wheel_get_wheel_is_per_loop_and_close() -> None:
    async def main() -> None:
        wheel = tw.get_wheel()
        assert tw.get_wheel() is wheel is tw.get_wheel(asyncio.get_running_loop())
        assert wheel.loop is asyncio.get_running_loop()
        out: list[int] = []
        h = wheel.call_later(0.01, out.append, 1)
        wheel.close()
        assert h.cancelled() and wheel.closed
        with pytest.raises(RuntimeError, match="closed"):
            wheel.call_later(0.01, out.append, 2)
        fresh = tw.get_wheel()
        assert fresh is not wheel and not fresh.closed
        fresh.call_later(0.01, out.append, 3)
        await asyncio.sleep(0.05)
        assert out == [3]

    run(main())


def test_wheel_private_wheel_and_loop_not_running() -> None:
    loop = VirtualTimeLoop()
    wheel = tw.TimerWheel(loop)
    out: list[str] = []
    wheel.call_later(0.01, out.append, "x")
    assert repr(wheel).startswith("<TimerWheel open pending=1")
    loop.run_until_complete(asyncio.sleep(0.05))
    loop.close()
    assert out == ["x"]


def test_wheel_bad_arguments_raise() -> None:
    async def main() -> None:
        wheel = tw.get_wheel()
        for bad in ("1", None, [1], b"x"):
            with pytest.raises(TypeError, match="delay must be a number of seconds"):
                wheel.call_later(bad, print)
        with pytest.raises(ValueError, match="delay must not be NaN"):
            wheel.call_later(float("nan"), print)
        with pytest.raises(TypeError, match="callback must be callable"):
            wheel.call_later(1, "print")
        with pytest.raises(TypeError, match="context must be a contextvars.Context"):
            wheel.call_later(1, print, context={})
        with pytest.raises(TypeError, match="when must be a number"):
            wheel.call_at("later", print)
        with pytest.raises(TypeError, match="delay must be a number"):
            tw.timeout("1")
        assert len(wheel) == 0
        h = wheel.call_later(float("inf"), print)  # clamped, never fires
        assert h.when() > 1e9 and not h.cancelled()
        h.cancel()

    run(main())
    with pytest.raises(TypeError, match="loop must be an asyncio event loop"):
        tw.TimerWheel(object())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        tw.call_later(1, print)  # no running loop


def test_wheel_keyboard_interrupt_leaves_loop_and_rest_runs_later() -> None:
    loop = VirtualTimeLoop()
    out: list[str] = []

    def interrupt() -> None:
        raise KeyboardInterrupt

    def before() -> None:
        out.append("before")
        tw.call_later(0, out.append, "scheduled by before")  # arms the driver

    async def schedule() -> None:
        tw.call_later(0.01, before)
        tw.call_later(0.01, interrupt)
        tw.call_later(0.01, out.append, "after")

    loop.run_until_complete(schedule())
    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(asyncio.sleep(0.05))
    assert out == ["before"]
    assert _wheel_handles(loop) == 1  # one driver, not two
    loop.run_until_complete(asyncio.sleep(0.05))
    loop.close()
    assert out == ["before", "after", "scheduled by before"]


def test_wheel_handles_share_context_snapshots_and_free_memory() -> None:
    async def main() -> tuple[int, int]:
        VAR.set("shared")
        hs = [tw.call_later(5, print) for _ in range(10)]
        ids = {id(h.get_context()) for h in hs}
        VAR.set("other")
        ids.add(id(tw.call_later(5, print).get_context()))
        tw.get_wheel().cancel_all()
        return len(ids), sum(h.cancelled() for h in hs)

    assert run(main()) == (2, 10)


def test_wheel_loop_is_not_kept_alive() -> None:
    import weakref

    loop = VirtualTimeLoop()

    async def main() -> None:
        tw.call_later(0.01, print)
        await asyncio.sleep(0.05)

    loop.run_until_complete(main())
    loop.close()
    ref = weakref.ref(loop)
    asyncio.set_event_loop(None)
    del loop
    run(asyncio.sleep(0))  # another loop replaces the cached wheel
    gc.collect()
    assert ref() is None


def test_call_at_keeps_when_though_the_clock_crosses_a_tick_between_reads() -> None:
    # Each read of this clock is 300 ns after the last.  call_at(when) adds
    # the handle at a clock read plus (when - an earlier read), which lands
    # past the tick boundary that ``when`` sits 73 ns before, and so does each
    # postpone that tries to move it back: the handle still keeps ``when``
    # as its deadline (asyncio's TimerHandle.when() is exactly ``when``).
    class CreepingClockLoop(VirtualTimeLoop):
        def time(self) -> float:
            self.now += 300e-9
            return self.now

    loop = CreepingClockLoop()
    try:
        wheel = tw.TimerWheel(loop)
        when = round(loop.now + 0.010, 3) - 73e-9  # 73 ns before a millisecond
        h = wheel.call_at(when, print)
        assert h._when == pytest.approx(when, abs=1e-9)
        assert h.when() >= when  # on its tick or the next, never early
        assert h.cancel()
    finally:
        loop.close()


def test_wheel_clock_choice() -> None:
    # asyncio's loops and uvloop read CLOCK_MONOTONIC: the wheel reads it in C;
    # any other loop is read through loop.time() (here: virtual time).
    default = asyncio.new_event_loop()
    virtual = VirtualTimeLoop()
    try:
        assert _asyncio_wheel._uses_monotonic_clock(default)
        assert not _asyncio_wheel._uses_monotonic_clock(virtual)
        wheel = tw.TimerWheel(virtual)
        virtual.now = 5000.25
        assert wheel.time() == 5000.25
        h = wheel.call_later(0.5, print)
        assert h.when() == 5000.75
        h.cancel()
    finally:
        default.close()
        virtual.close()
    uvloop = pytest.importorskip("uvloop")
    loop = uvloop.new_event_loop()
    try:
        assert _asyncio_wheel._uses_monotonic_clock(loop)
    finally:
        loop.close()


# -- handle.postpone(): move a pending timer ----------------------------------------


def test_handle_postpone_moves_a_pending_callback() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        log: list[tuple[str, float]] = []
        h = tw.call_later(1.0, lambda: log.append(("idle", loop.time() - t0)))
        for _ in range(5):  # a message every 0.6 s keeps the connection alive
            await asyncio.sleep(0.6)
            assert h.postpone(1.0) is True
            assert h.when() == pytest.approx(loop.time() + 1.0, abs=0.001)
            assert not h.cancelled()
        await asyncio.sleep(2)
        assert h.postpone(1.0) is False  # already ran
        return log

    ((name, at),) = run(main())
    assert name == "idle" and 4.0 <= at <= 4.001  # 5 x 0.6 s, then 1 s


def test_handle_postpone_sooner_rearms_the_loop_handle() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        fired = loop.create_future()
        h = tw.call_later(100.0, lambda: fired.set_result(loop.time()))
        t0 = loop.time()
        assert h.postpone(0.25) is True
        return await fired, t0

    at, t0 = run(main())
    assert 0.25 <= at - t0 <= 0.251


def test_handle_postpone_nonpositive_runs_next_iteration() -> None:
    async def main() -> list[str]:
        log: list[str] = []
        h = tw.call_later(100.0, log.append, "ran")
        assert h.postpone(-5) is True
        await spin(2)
        return log

    assert run(main()) == ["ran"]


def test_handle_postpone_after_cancel_and_bad_delays() -> None:
    async def main() -> None:
        wheel = tw.get_wheel()
        h = wheel.call_later(10.0, print)
        when = h.when()
        for bad in ("1", None, [1]):
            with pytest.raises(TypeError, match="delay must be a number of seconds"):
                h.postpone(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="delay must not be NaN"):
            h.postpone(float("nan"))
        assert h.when() == when and len(wheel) == 1  # left in place
        assert h.postpone(float("inf")) is True  # clamped, like call_later
        assert 1e9 < h.when() < float("inf")
        assert h.cancel() is True
        assert h.postpone(1.0) is False and h.cancelled()
        assert len(wheel) == 0

    run(main())


def test_timeout_postpone_moves_the_deadline() -> None:
    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        cm = tw.timeout(1.0)
        with pytest.raises(RuntimeError, match="has not been entered"):
            cm.postpone(1.0)
        t0 = loop.time()
        with pytest.raises(TimeoutError):
            async with cm:
                for _ in range(3):
                    await asyncio.sleep(0.5)
                    assert cm.postpone(1.0) is True
                    assert cm.when() == loop.time() + 1.0
                await asyncio.sleep(10)
        return cm.expired(), loop.time() - t0

    expired, took = run(main())
    assert expired and 2.5 <= took <= 2.501
