"""Port of CPython's ``Lib/test/test_asyncio/test_timeouts.py`` (3.11-3.13).

Each test keeps its upstream name and body; ``unittest`` assertions became
plain asserts and ``pytest.raises``.  ``T`` is ``asyncio`` with
``--upstream-target=stdlib`` and :mod:`tickwheel.compat_asyncio` otherwise.
The port follows the running interpreter as the stdlib does: the chained
``TimeoutError`` checks and the tests added in 3.13
(``test_foreign_exception_on_timeout_2``, ``test_timeout_taskgroup``) run on
3.13+, and ``test_timeout_exception_cause`` (dropped from the 3.13 file, still
true there) and ``test_timeout_exception_context`` (new in 3.13, true on
3.11/3.12 too) run on every version.  Like ``IsolatedAsyncioTestCase``, each
test runs in a fresh event loop in debug mode; the timings are upstream's
(10 ms deadlines, a 0.1 s busy loop) and no test asserts a duration tighter
than upstream's one second.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import types
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="asyncio.timeout is new in Python 3.11"
)

PY313 = sys.version_info >= (3, 13)
only_313 = pytest.mark.skipif(not PY313, reason="added to test_timeouts.py in 3.13")


@pytest.fixture
def T(upstream_target: str) -> Any:  # noqa: N802 - reads like the module name
    """The module whose timeout/timeout_at are under test."""
    if upstream_target == "stdlib":
        return asyncio
    from tickwheel import compat_asyncio

    return types.SimpleNamespace(
        timeout=compat_asyncio.timeout, timeout_at=compat_asyncio.timeout_at
    )


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """What IsolatedAsyncioTestCase does: a new debug-mode loop per test."""
    asyncio.run(test(), debug=True)


async def await_without_task(coro: Awaitable[Any]) -> None:
    # test.test_asyncio.utils.await_without_task: drive the coroutine from a
    # plain loop callback, where there is no current task.
    exc = None

    def func() -> None:
        nonlocal exc
        try:
            for _ in coro.__await__():
                pass
        except BaseException as err:
            exc = err

    asyncio.get_running_loop().call_soon(func)
    await asyncio.sleep(0)
    if exc is not None:
        raise exc


def test_timeout_basic(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(TimeoutError):
            async with T.timeout(0.01) as cm:
                await asyncio.sleep(10)
        assert cm.expired()

    run(body)


def test_timeout_at_basic(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            deadline = loop.time() + 0.01
            async with T.timeout_at(deadline) as cm:
                await asyncio.sleep(10)
        assert cm.expired()
        assert deadline == cm.when()

    run(body)


def test_nested_timeouts(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        cancelled = False
        with pytest.raises(TimeoutError):
            # Upstream: + 0.01.  Both blocks must be entered before the shared
            # deadline passes: on a loaded host an inner block entered after it
            # expires at once (call_soon) while the outer one, on the wheel, is
            # due up to 1 ms later (deadlines round up to the tick), so the inner
            # block would raise TimeoutError instead of the outer one.
            deadline = loop.time() + 0.1
            async with T.timeout_at(deadline) as cm1:
                # Only the topmost context manager should raise TimeoutError
                try:
                    async with T.timeout_at(deadline) as cm2:
                        await asyncio.sleep(10)
                except asyncio.CancelledError:
                    cancelled = True
                    raise
        assert cancelled
        assert cm1.expired()
        assert cm2.expired()

    run(body)


def test_waiter_cancelled(T: Any) -> None:
    async def body() -> None:
        cancelled = False
        with pytest.raises(TimeoutError):
            async with T.timeout(0.01):
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    cancelled = True
                    raise
        assert cancelled

    run(body)


def test_timeout_not_called(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        async with T.timeout(10) as cm:
            await asyncio.sleep(0.01)
        t1 = loop.time()
        assert not cm.expired()
        assert cm.when() > t1

    run(body)


def test_timeout_disabled(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(None) as cm:
            await asyncio.sleep(0.01)
        assert not cm.expired()
        assert cm.when() is None

    run(body)


def test_timeout_at_disabled(T: Any) -> None:
    async def body() -> None:
        async with T.timeout_at(None) as cm:
            await asyncio.sleep(0.01)
        assert not cm.expired()
        assert cm.when() is None

    run(body)


def test_timeout_zero(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(TimeoutError):
            async with T.timeout(0) as cm:
                await asyncio.sleep(10)
        t1 = loop.time()
        assert cm.expired()
        assert t0 <= cm.when() <= t1

    run(body)


def test_timeout_zero_sleep_zero(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(TimeoutError):
            async with T.timeout(0) as cm:
                await asyncio.sleep(0)
        t1 = loop.time()
        assert cm.expired()
        assert t0 <= cm.when() <= t1

    run(body)


def test_timeout_in_the_past_sleep_zero(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(TimeoutError):
            async with T.timeout(-11) as cm:
                await asyncio.sleep(0)
        t1 = loop.time()
        assert cm.expired()
        assert t0 >= cm.when() <= t1

    run(body)


def test_foreign_exception_passed(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(KeyError):
            async with T.timeout(0.01) as cm:
                raise KeyError
        assert not cm.expired()

    run(body)


def test_timeout_exception_context(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(TimeoutError) as cm:
            async with T.timeout(0.01):
                try:
                    1 / 0
                finally:
                    await asyncio.sleep(1)
        e = cm.value
        # Expect TimeoutError caused by CancelledError raised during handling
        # of ZeroDivisionError.
        e2 = e.__cause__
        assert isinstance(e2, asyncio.CancelledError)
        assert e.__context__ is e2
        assert e2.__cause__ is None
        assert isinstance(e2.__context__, ZeroDivisionError)

    run(body)


def test_timeout_exception_cause(T: Any) -> None:
    # In the 3.11 and 3.12 files; its check is part of 3.13's chain asserts.
    async def body() -> None:
        with pytest.raises(asyncio.TimeoutError) as exc:
            async with T.timeout(0):
                await asyncio.sleep(1)
        cause = exc.value.__cause__
        assert isinstance(cause, asyncio.CancelledError)

    run(body)


def test_foreign_exception_on_timeout(T: Any) -> None:
    async def body() -> None:
        async def crash() -> None:
            try:
                await asyncio.sleep(1)
            finally:
                1 / 0

        with pytest.raises(ZeroDivisionError) as cm:
            async with T.timeout(0.01):
                await crash()
        if not PY313:  # the chain checks below came with 3.13's change
            return
        e = cm.value
        # Expect ZeroDivisionError raised during handling of TimeoutError
        # caused by CancelledError.
        assert e.__cause__ is None
        e2 = e.__context__
        assert isinstance(e2, TimeoutError)
        e3 = e2.__cause__
        assert isinstance(e3, asyncio.CancelledError)
        assert e2.__context__ is e3

    run(body)


@only_313
def test_foreign_exception_on_timeout_2(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(ZeroDivisionError) as cm:
            async with T.timeout(0.01):
                try:
                    try:
                        raise ValueError
                    finally:
                        await asyncio.sleep(1)
                finally:
                    try:
                        raise KeyError
                    finally:
                        1 / 0
        e = cm.value
        # Expect ZeroDivisionError raised during handling of KeyError
        # raised during handling of TimeoutError caused by CancelledError.
        assert e.__cause__ is None
        e2 = e.__context__
        assert isinstance(e2, KeyError)
        assert e2.__cause__ is None
        e3 = e2.__context__
        assert isinstance(e3, TimeoutError)
        e4 = e3.__cause__
        assert isinstance(e4, asyncio.CancelledError)
        assert e4.__cause__ is None
        assert isinstance(e4.__context__, ValueError)
        assert e3.__context__ is e4

    run(body)


def test_foreign_cancel_doesnt_timeout_if_not_expired(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(asyncio.CancelledError):
            async with T.timeout(10) as cm:
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
                await asyncio.sleep(10)
        assert not cm.expired()

    run(body)


def test_outer_task_is_not_cancelled(T: Any) -> None:
    async def body() -> None:
        async def outer() -> None:
            with pytest.raises(TimeoutError):
                async with T.timeout(0.001):
                    await asyncio.sleep(10)

        task = asyncio.create_task(outer())
        await task
        assert not task.cancelled()
        assert task.done()

    run(body)


def test_nested_timeouts_concurrent(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(TimeoutError):
            async with T.timeout(0.002):
                with pytest.raises(TimeoutError):
                    async with T.timeout(0.1):
                        # Pretend we crunch some numbers.
                        time.sleep(0.01)
                        await asyncio.sleep(1)

    run(body)


def test_nested_timeouts_loop_busy(T: Any) -> None:
    async def body() -> None:
        # After the inner timeout is an expensive operation which should
        # be stopped by the outer timeout.
        loop = asyncio.get_running_loop()
        # Disable a message about long running task
        loop.slow_callback_duration = 10
        t0 = loop.time()
        with pytest.raises(TimeoutError):
            async with T.timeout(0.1):  # (1)
                with pytest.raises(TimeoutError):
                    async with T.timeout(0.01):  # (2)
                        # Pretend the loop is busy for a while.
                        time.sleep(0.1)
                        await asyncio.sleep(1)
                # TimeoutError was cought by (2)
                await asyncio.sleep(10)  # This sleep should be interrupted by (1)
        t1 = loop.time()
        assert t0 <= t1 <= t0 + 1

    run(body)


def test_reschedule(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        deadline1 = loop.time() + 10
        deadline2 = deadline1 + 20

        async def f() -> None:
            async with T.timeout_at(deadline1) as cm:
                fut.set_result(cm)
                await asyncio.sleep(50)

        task = asyncio.create_task(f())
        cm = await fut

        assert cm.when() == deadline1
        cm.reschedule(deadline2)
        assert cm.when() == deadline2
        cm.reschedule(None)
        assert cm.when() is None

        task.cancel()

        with pytest.raises(asyncio.CancelledError):
            await task
        assert not cm.expired()

    run(body)


def test_repr_active(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(10) as cm:
            assert re.search(r"<Timeout \[active\] when=\d+\.\d*>", repr(cm))

    run(body)


def test_repr_expired(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(TimeoutError):
            async with T.timeout(0.01) as cm:
                await asyncio.sleep(10)
        assert repr(cm) == "<Timeout [expired]>"

    run(body)


def test_repr_finished(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(10) as cm:
            await asyncio.sleep(0)
        assert repr(cm) == "<Timeout [finished]>"

    run(body)


def test_repr_disabled(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(None) as cm:
            assert repr(cm) == r"<Timeout [active] when=None>"

    run(body)


def test_nested_timeout_in_finally(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(TimeoutError) as cm1:
            async with T.timeout(0.01):
                try:
                    await asyncio.sleep(1)
                finally:
                    with pytest.raises(TimeoutError) as cm2:
                        async with T.timeout(0.01):
                            await asyncio.sleep(10)
        if not PY313:  # the chain checks below came with 3.13
            return
        e1 = cm1.value
        # Expect TimeoutError caused by CancelledError.
        e12 = e1.__cause__
        assert isinstance(e12, asyncio.CancelledError)
        assert e12.__cause__ is None
        assert e12.__context__ is None
        assert e1.__context__ is e12
        e2 = cm2.value
        # Expect TimeoutError caused by CancelledError raised during
        # handling of other CancelledError (which is the same as in
        # the above chain).
        e22 = e2.__cause__
        assert isinstance(e22, asyncio.CancelledError)
        assert e22.__cause__ is None
        assert e22.__context__ is e12
        assert e2.__context__ is e22

    run(body)


def test_timeout_after_cancellation(T: Any) -> None:
    async def body() -> None:
        try:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(1)  # work which will be cancelled
        except asyncio.CancelledError:
            pass
        finally:
            with pytest.raises(TimeoutError):
                async with T.timeout(0.0):
                    await asyncio.sleep(1)  # some cleanup

    run(body)


def test_cancel_in_timeout_after_cancellation(T: Any) -> None:
    async def body() -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            task.cancel()
            await asyncio.sleep(1)  # work which will be cancelled
        except asyncio.CancelledError:
            pass
        finally:
            with pytest.raises(asyncio.CancelledError):
                async with T.timeout(1.0):
                    task.cancel()
                    await asyncio.sleep(2)  # some cleanup

    run(body)


def test_timeout_already_entered(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(0.01) as cm:
            with pytest.raises(RuntimeError, match="has already been entered"):
                async with cm:
                    pass

    run(body)


def test_timeout_double_enter(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(0.01) as cm:
            pass
        with pytest.raises(RuntimeError, match="has already been entered"):
            async with cm:
                pass

    run(body)


def test_timeout_finished(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(0.01) as cm:
            pass
        with pytest.raises(RuntimeError, match="finished"):
            cm.reschedule(0.02)

    run(body)


def test_timeout_expired(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(TimeoutError):
            async with T.timeout(0.01) as cm:
                await asyncio.sleep(1)
        with pytest.raises(RuntimeError, match="expired"):
            cm.reschedule(0.02)

    run(body)


def test_timeout_expiring(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(0.01) as cm:
            with pytest.raises(asyncio.CancelledError):
                await asyncio.sleep(1)
            with pytest.raises(RuntimeError, match="expiring"):
                cm.reschedule(0.02)

    run(body)


def test_timeout_not_entered(T: Any) -> None:
    async def body() -> None:
        cm = T.timeout(0.01)
        with pytest.raises(RuntimeError, match="has not been entered"):
            cm.reschedule(0.02)

    run(body)


def test_timeout_without_task(T: Any) -> None:
    async def body() -> None:
        cm = T.timeout(0.01)
        with pytest.raises(RuntimeError, match="task"):
            await await_without_task(cm.__aenter__())
        with pytest.raises(RuntimeError, match="has not been entered"):
            cm.reschedule(0.02)

    run(body)


@only_313
def test_timeout_taskgroup(T: Any) -> None:
    async def body() -> None:
        async def task() -> None:
            try:
                await asyncio.sleep(2)  # Will be interrupted after 0.01 second
            finally:
                1 / 0  # Crash in cleanup

        with pytest.raises(ExceptionGroup) as cm:  # noqa: F821 - 3.11+
            async with T.timeout(0.01):
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(task())
                    try:
                        raise ValueError
                    finally:
                        await asyncio.sleep(1)
        eg = cm.value
        # Expect ExceptionGroup raised during handling of TimeoutError caused
        # by CancelledError raised during handling of ValueError.
        assert eg.__cause__ is None
        e_1 = eg.__context__
        assert isinstance(e_1, TimeoutError)
        e_2 = e_1.__cause__
        assert isinstance(e_2, asyncio.CancelledError)
        assert e_2.__cause__ is None
        assert isinstance(e_2.__context__, ValueError)
        assert e_1.__context__ is e_2

        assert len(eg.exceptions) == 1, eg
        e1 = eg.exceptions[0]
        # Expect ZeroDivisionError raised during handling of TimeoutError
        # caused by CancelledError (it is a different CancelledError).
        assert isinstance(e1, ZeroDivisionError)
        assert e1.__cause__ is None
        e2 = e1.__context__
        assert isinstance(e2, TimeoutError)
        e3 = e2.__cause__
        assert isinstance(e3, asyncio.CancelledError)
        assert e3.__context__ is None
        assert e3.__cause__ is None
        assert e2.__context__ is e3

    run(body)
