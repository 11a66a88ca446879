"""CPython's timeout, wait_for and TaskGroup tests on a tickwheel loop over uvloop.

The classes of ``test_cpython_asyncio_{timeouts,waitfor,taskgroups}`` again,
under ``tw.EventLoopPolicy(loop_class=uvloop.Loop)``; with
``--upstream-target=stdlib`` under ``uvloop.EventLoopPolicy()``, which shows
what uvloop itself passes.  See ``_cpython_asyncio``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, policy_fixture

uvloop = pytest.importorskip("uvloop")

AsyncioWaitForTest = load("test_waitfor").AsyncioWaitForTest
if sys.version_info >= (3, 11):
    TimeoutTests = load("test_timeouts").TimeoutTests
    TestTaskGroup = load("test_taskgroups").TestTaskGroup

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _policy(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from policy_fixture(
        request, SKIPS, loop_class=uvloop.Loop, stdlib_policy=uvloop.EventLoopPolicy
    )
