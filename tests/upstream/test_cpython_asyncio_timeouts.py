"""CPython's ``test_asyncio/test_timeouts.py`` (3.11+) on the tickwheel event loop.

``asyncio.timeout()`` arms its deadline with ``loop.call_at`` and cancels it
on exit; on a tickwheel loop both go to the wheel.  See ``_cpython_asyncio``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, loop_fixture

upstream = load("test_timeouts")
if upstream is not None:  # None on 3.10 (no asyncio.timeout)
    TimeoutTests = upstream.TimeoutTests

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _loops(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from loop_fixture(request, SKIPS)
