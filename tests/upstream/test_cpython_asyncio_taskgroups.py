"""CPython's ``test_asyncio/test_taskgroups.py`` (3.11+) on the tickwheel event loop.

TaskGroup tests sleep, time out and cancel: ``call_later``/``call_at``
and their cancels run on the wheel.  See ``_cpython_asyncio``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, policy_fixture

upstream = load("test_taskgroups", since=(3, 11))
TestTaskGroup = upstream.TestTaskGroup

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _policy(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from policy_fixture(request, SKIPS)
