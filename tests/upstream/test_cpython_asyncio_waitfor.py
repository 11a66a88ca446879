"""CPython's ``test_asyncio/test_waitfor.py`` on the tickwheel event loop.

``asyncio.wait_for`` uses ``loop.call_later`` (3.10-3.11) or ``asyncio.timeout``
(3.12+); on a tickwheel loop both go to the wheel.  See ``_cpython_asyncio``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, loop_fixture

upstream = load("test_waitfor")
assert upstream is not None
AsyncioWaitForTest = upstream.AsyncioWaitForTest
if sys.version_info >= (3, 12):
    WaitForShieldTests = upstream.WaitForShieldTests

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _loops(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from loop_fixture(request, SKIPS)
