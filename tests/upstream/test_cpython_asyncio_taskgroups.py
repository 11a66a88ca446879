"""CPython's ``test_asyncio/test_taskgroups.py`` (3.11+) on the tickwheel event loop.

TaskGroup tests sleep, time out and cancel: ``call_later``/``call_at``
and their cancels run on the wheel.  From 3.13.x (and in 3.14+) upstream
runs the tests twice, in ``TestTaskGroup`` (``loop_factory =
asyncio.EventLoop``) and in ``TestEagerTaskTaskGroup`` (the same loop with
``asyncio.eager_task_factory``); both run here, on tickwheel loops with the
task factory upstream's loop has.  See ``_cpython_asyncio``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, loop_fixture

upstream = load("test_taskgroups")
if upstream is not None:  # None on 3.10 (no asyncio.TaskGroup)
    TestTaskGroup = upstream.TestTaskGroup
    if hasattr(upstream, "TestEagerTaskTaskGroup"):  # 3.13.x (later patches), 3.14+
        TestEagerTaskTaskGroup = upstream.TestEagerTaskTaskGroup

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _loops(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from loop_fixture(request, SKIPS)
