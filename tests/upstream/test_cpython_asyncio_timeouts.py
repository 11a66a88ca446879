"""CPython's ``test_asyncio/test_timeouts.py`` (3.11+) on the tickwheel event loop.

``asyncio.timeout()`` arms its deadline with ``loop.call_at`` and cancels it
on exit; on a tickwheel loop both go to the wheel.  See ``_cpython_asyncio``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, policy_fixture

upstream = load("test_timeouts", since=(3, 11))
TimeoutTests = upstream.TimeoutTests

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _policy(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from policy_fixture(request, SKIPS)
