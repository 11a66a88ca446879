"""CPython's timeout, wait_for and TaskGroup tests on a tickwheel loop over uvloop.

The classes of ``test_cpython_asyncio_{timeouts,waitfor,taskgroups}`` again,
on ``tw.new_event_loop(uvloop.Loop)`` loops; with ``--upstream-target=stdlib``
on plain ``uvloop.Loop`` loops, which shows what uvloop itself passes.  See
``_cpython_asyncio``.
"""

from __future__ import annotations

import sys

import pytest

from ._cpython_asyncio import load

uvloop = pytest.importorskip("uvloop")

_waitfor = load("test_waitfor")
assert _waitfor is not None
AsyncioWaitForTest = _waitfor.AsyncioWaitForTest
_timeouts = load("test_timeouts")
_taskgroups = load("test_taskgroups")
if _timeouts is not None and _taskgroups is not None:  # 3.11+
    TimeoutTests = _timeouts.TimeoutTests
    TestTaskGroup = _taskgroups.TestTaskGroup
    if hasattr(_taskgroups, "TestEagerTaskTaskGroup"):
        TestEagerTaskTaskGroup = _taskgroups.TestEagerTaskTaskGroup

SKIPS: dict[str, str] = {}


def _uvloop_runs_eager_task_factory() -> bool:
    """Whether uvloop can call asyncio's eager task factory on this Python.

    uvloop 0.23 passes ``eager_start=`` to every task factory, which the
    factory of ``asyncio.create_eager_task_factory`` accepts only from 3.14:
    on 3.12/3.13 every test of ``TestEagerTaskTaskGroup`` then fails in
    ``asyncSetUp`` on plain uvloop too, before any tickwheel code runs.
    """
    import asyncio

    loop = uvloop.new_event_loop()
    try:
        loop.set_task_factory(asyncio.create_eager_task_factory(asyncio.Task))

        async def probe() -> None:
            pass

        coro = probe()
        try:
            loop.run_until_complete(loop.create_task(coro))
        except TypeError:
            coro.close()
            return False
        return True
    finally:
        loop.close()


# Where uvloop cannot run the eager factory at all, the class is not
# collected (each of its tests would fail in asyncSetUp on plain uvloop too,
# leaking never-awaited coroutines); the test below pins that fact instead,
# and fails the day uvloop or asyncio fixes it.  The same class runs over
# asyncio's loop in test_cpython_asyncio_taskgroups.py on every Python.
_EAGER_BROKEN = (
    "TestEagerTaskTaskGroup" in globals() and not _uvloop_runs_eager_task_factory()
)
if _EAGER_BROKEN:
    del TestEagerTaskTaskGroup


@pytest.mark.skipif(
    not _EAGER_BROKEN,
    reason="no eager-factory clash here: TestEagerTaskTaskGroup runs above, "
    "or this Python has none",
)
def test_uvloop_cannot_run_asyncio_eager_task_factory_here() -> None:
    assert sys.version_info < (3, 14), "3.14's eager factory takes eager_start="
    assert not _uvloop_runs_eager_task_factory()
