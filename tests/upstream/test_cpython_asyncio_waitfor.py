"""CPython's ``test_asyncio/test_waitfor.py`` on the tickwheel event loop.

``asyncio.wait_for`` uses ``loop.call_later`` (3.9-3.11) or ``asyncio.timeout``
(3.12+); on a tickwheel loop both go to the wheel.  See ``_cpython_asyncio``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, policy_fixture

upstream = load("test_waitfor")
AsyncioWaitForTest = upstream.AsyncioWaitForTest
if hasattr(upstream, "WaitForShieldTests"):  # 3.12+
    WaitForShieldTests = upstream.WaitForShieldTests

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _policy(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from policy_fixture(request, SKIPS)
