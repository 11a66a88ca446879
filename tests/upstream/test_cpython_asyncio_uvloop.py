"""CPython's timeout, wait_for and TaskGroup tests on a tickwheel loop over uvloop.

The classes of ``test_cpython_asyncio_{timeouts,waitfor,taskgroups}`` again,
on ``tw.new_event_loop(uvloop.Loop)`` loops; with ``--upstream-target=stdlib``
on plain ``uvloop.Loop`` loops, which shows what uvloop itself passes.  See
``_cpython_asyncio``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import HAS_LOOP_FACTORY, load, loop_fixture

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


@pytest.fixture(autouse=True)
def _loops(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from loop_fixture(
        request,
        SKIPS,
        loop_class=uvloop.Loop,
        stdlib_loop_class=uvloop.Loop,
        # Only before 3.13 (no loop_factory), where policies are not deprecated.
        stdlib_policy=None if HAS_LOOP_FACTORY else uvloop.EventLoopPolicy,
    )
