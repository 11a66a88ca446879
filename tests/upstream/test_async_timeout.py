"""Port of aio-libs ``async-timeout``'s ``tests/test_timeout.py``.

async-timeout 5 is, on Python 3.11+, a thin layer over ``asyncio.Timeout``:
``expired`` is ``expired()``, ``deadline`` is ``when()``, ``reject()`` is
``reschedule(None)``, ``update(d)`` is ``reschedule(d)`` and ``shift(d)`` is
``reschedule(when() + d)``.  This port runs the upstream tests through that
mapping (the helpers below) against ``asyncio.timeout`` with
``--upstream-target=stdlib`` and :mod:`tickwheel.compat_asyncio` otherwise,
so where async-timeout 4 had its own messages ("invalid state EXIT",
"cannot reschedule expired timeout") the port expects asyncio's, as
async-timeout 5 does.  Tests that do not map are skipped with the reason.
Each test keeps its upstream name and runs in a fresh event loop.

Wall clock: upstream bounds durations from both sides; the port keeps the
lower bound (a timeout never fires early, a disabled one never fires) and
drops the upper one, which only measures how loaded the machine is.
"""

from __future__ import annotations

import asyncio
import sys
import time
import types
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="asyncio.timeout is new in Python 3.11"
)


@pytest.fixture
def T(upstream_target: str) -> Any:  # noqa: N802 - reads like the module name
    if upstream_target == "stdlib":
        return asyncio
    from tickwheel import compat_asyncio

    return types.SimpleNamespace(
        timeout=compat_asyncio.timeout, timeout_at=compat_asyncio.timeout_at
    )


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


# -- async-timeout 5's mapping onto asyncio.Timeout ----------------------------
def expired(cm: Any) -> bool:
    return bool(cm.expired())


def deadline(cm: Any) -> float | None:
    return cm.when()  # type: ignore[no-any-return]


def reject(cm: Any) -> None:
    cm.reschedule(None)


def shift(cm: Any, delay: float) -> None:
    when = cm.when()
    if when is None:
        raise RuntimeError("cannot shift timeout if deadline is not scheduled")
    cm.reschedule(when + delay)


def update(cm: Any, when: float) -> None:
    cm.reschedule(when)


# -- the tests -------------------------------------------------------------------
def test_timeout(T: Any) -> None:
    async def body() -> None:
        canceled_raised = False

        async def long_running_task() -> None:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                nonlocal canceled_raised
                canceled_raised = True
                raise

        with pytest.raises(asyncio.TimeoutError):
            async with T.timeout(0.01):
                await long_running_task()
        assert canceled_raised, "CancelledError was not raised"

    run(body)


def test_timeout_finish_in_time(T: Any) -> None:
    async def body() -> None:
        async def long_running_task() -> str:
            await asyncio.sleep(0.01)
            return "done"

        async with T.timeout(0.1):
            resp = await long_running_task()
        assert resp == "done"

    run(body)


def test_timeout_disable(T: Any) -> None:
    async def body() -> None:
        async def long_running_task() -> str:
            await asyncio.sleep(0.1)
            return "done"

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with T.timeout(None):
            resp = await long_running_task()
        assert resp == "done"
        dt = loop.time() - t0
        assert 0.09 < dt, dt

    run(body)


def test_timeout_is_none_no_schedule(T: Any) -> None:
    # Upstream also checks the private cm._timeout_handler is None.
    async def body() -> None:
        async with T.timeout(None) as cm:
            assert deadline(cm) is None

    run(body)


def test_timeout_no_loop(T: Any) -> None:
    with pytest.raises(RuntimeError, match="no running event loop"):
        T.timeout(None)


def test_timeout_zero(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(asyncio.TimeoutError):
            async with T.timeout(0):
                await asyncio.sleep(10)

    run(body)


def test_timeout_not_relevant_exception(T: Any) -> None:
    async def body() -> None:
        await asyncio.sleep(0)
        with pytest.raises(KeyError):
            async with T.timeout(0.1):
                raise KeyError

    run(body)


def test_timeout_canceled_error_is_not_converted_to_timeout(T: Any) -> None:
    async def body() -> None:
        await asyncio.sleep(0)
        with pytest.raises(asyncio.CancelledError):
            async with T.timeout(0.001):
                raise asyncio.CancelledError

    run(body)


def test_timeout_blocking_loop(T: Any) -> None:
    async def body() -> None:
        async def long_running_task() -> str:
            time.sleep(0.1)
            return "done"

        async with T.timeout(0.01):
            result = await long_running_task()
        assert result == "done"

    run(body)


def test_for_race_conditions(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.call_later(0.1, fut.set_result, "done")
        async with T.timeout(0.5):
            resp = await fut
        assert resp == "done"

    run(body)


def test_timeout_time(T: Any) -> None:
    async def body() -> None:
        foo_running = None
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(asyncio.TimeoutError):
            async with T.timeout(0.1):
                foo_running = True
                try:
                    await asyncio.sleep(0.2)
                finally:
                    foo_running = False

        dt = loop.time() - start
        assert 0.09 < dt
        assert not foo_running

    run(body)


def test_outer_coro_is_not_cancelled(T: Any) -> None:
    async def body() -> None:
        has_timeout = False

        async def outer() -> None:
            nonlocal has_timeout
            try:
                async with T.timeout(0.001):
                    await asyncio.sleep(1)
            except asyncio.TimeoutError:
                has_timeout = True

        task = asyncio.ensure_future(outer())
        await task
        assert has_timeout
        assert not task.cancelled()
        assert task.done()

    run(body)


def test_cancel_outer_coro(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        async def outer() -> None:
            fut.set_result(None)
            await asyncio.sleep(1)

        task = asyncio.ensure_future(outer())
        await fut
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        assert task.done()

    run(body)


@pytest.mark.skip(
    reason="does not map: asyncio raises TimeoutError *from* the CancelledError "
    "(so __suppress_context__ is True), async-timeout 4 raised it bare; the chain "
    "is checked by test_asyncio_timeouts.py::test_timeout_exception_cause"
)
def test_timeout_suppress_exception_chain(T: Any) -> None:
    pass


def test_timeout_expired(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(asyncio.TimeoutError):
            async with T.timeout(0.01) as cm:
                await asyncio.sleep(10)
        assert expired(cm)

    run(body)


def test_timeout_inner_timeout_error(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(asyncio.TimeoutError):
            async with T.timeout(0.01) as cm:
                raise asyncio.TimeoutError
        assert not expired(cm)

    run(body)


def test_timeout_inner_other_error(T: Any) -> None:
    async def body() -> None:
        class MyError(RuntimeError):
            pass

        with pytest.raises(MyError):
            async with T.timeout(0.01) as cm:
                raise MyError
        assert not expired(cm)

    run(body)


def test_timeout_at(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        with pytest.raises(asyncio.TimeoutError):
            now = loop.time()
            async with T.timeout_at(now + 0.01) as cm:
                await asyncio.sleep(10)
        assert expired(cm)

    run(body)


def test_timeout_at_not_fired(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        async with T.timeout_at(now + 1) as cm:
            await asyncio.sleep(0)
        assert not expired(cm)

    run(body)


@pytest.mark.skip(
    reason="does not map: reject() before entering is reschedule(None), which "
    "asyncio.Timeout refuses ('has not been entered'); see test_timeout_not_entered"
)
def test_expired_after_rejecting(T: Any) -> None:
    pass


def test_reject_finished(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(10) as t:
            await asyncio.sleep(0)

        assert not expired(t)
        # async-timeout 4: "invalid state EXIT"
        with pytest.raises(RuntimeError, match="Cannot change state of finished"):
            reject(t)

    run(body)


def test_expired_after_timeout(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(asyncio.TimeoutError):
            async with T.timeout(0.01) as t:
                assert not expired(t)
                await asyncio.sleep(10)
        assert expired(t)

    run(body)


def test_deadline(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with T.timeout(1) as cm:
            t1 = loop.time()
            assert deadline(cm) is not None
            assert t0 + 1 <= deadline(cm) <= t1 + 1  # type: ignore[operator]

    run(body)


def test_async_timeout(T: Any) -> None:
    async def body() -> None:
        with pytest.raises(asyncio.TimeoutError):
            async with T.timeout(0.01) as cm:
                await asyncio.sleep(10)
        assert expired(cm)

    run(body)


def test_async_no_timeout(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(1) as cm:
            await asyncio.sleep(0)
        assert not expired(cm)

    run(body)


def test_shift(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with T.timeout(1) as cm:
            t1 = loop.time()
            assert deadline(cm) is not None
            assert t0 + 1 <= deadline(cm) <= t1 + 1  # type: ignore[operator]
            before = deadline(cm)
            shift(cm, 1)
            # upstream bounds this by t0 + 2.1, which fails whenever the loop
            # is held up 0.1 s between t0 and t1 (it was, once, in CI): the
            # shift is exact, and the window is the one measured above.
            assert deadline(cm) == before + 1  # type: ignore[operator]
            assert t0 + 2 <= deadline(cm) <= t1 + 2  # type: ignore[operator]

    run(body)


@pytest.mark.skip(
    reason="does not map: the check is in async-timeout's shift() (the helper "
    "here), not in asyncio.Timeout, whose reschedule(None + 1) cannot be asked"
)
def test_shift_nonscheduled(T: Any) -> None:
    pass


def test_shift_negative_expired(T: Any) -> None:
    # async-timeout 4 raised CancelledError from shift() itself; through
    # reschedule() (async-timeout 5) a past deadline cancels the task before
    # it resumes, so the next await raises it.
    async def body() -> None:
        async with T.timeout(1) as cm:
            with pytest.raises(asyncio.CancelledError):
                shift(cm, -1)
                await asyncio.sleep(10)
        assert expired(cm)

    run(body)


def test_shift_by_expired(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(0.001) as cm:
            with pytest.raises(asyncio.CancelledError):
                await asyncio.sleep(10)
            # async-timeout 4: "cannot reschedule expired timeout"
            with pytest.raises(RuntimeError, match="Cannot change state of expiring"):
                shift(cm, 10)

    run(body)


def test_shift_to_expired(T: Any) -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with T.timeout_at(t0 + 0.001) as cm:
            with pytest.raises(asyncio.CancelledError):
                await asyncio.sleep(10)
            with pytest.raises(RuntimeError, match="Cannot change state of expiring"):
                update(cm, t0 + 10)

    run(body)


def test_shift_by_after_cm_exit(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(1) as cm:
            await asyncio.sleep(0)
        # async-timeout 4: "cannot reschedule after exit from context manager"
        with pytest.raises(RuntimeError, match="Cannot change state of finished"):
            shift(cm, 1)

    run(body)


def test_enter_twice(T: Any) -> None:
    async def body() -> None:
        async with T.timeout(10) as t:
            await asyncio.sleep(0)

        # async-timeout 4: "invalid state EXIT"
        with pytest.raises(RuntimeError, match="has already been entered"):
            async with t:
                await asyncio.sleep(0)

    run(body)


@pytest.mark.skip(
    reason="does not map: asyncio.Timeout has no synchronous `with` (async-timeout "
    "4 deprecated it and 5 removed it)"
)
def test_deprecated_with(T: Any) -> None:
    pass
