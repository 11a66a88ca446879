"""CPython's ``test_asyncio/test_events.py``: its real-loop tests on tickwheel.

``EventLoopTestsMixin`` and ``SubprocessTestsMixin`` (run by upstream as
``EPollEventLoopTests`` etc.) drive a real selector loop: timers
(``test_call_later``, ``test_run_until_complete``, ``test_timeout_rounding``),
``call_soon(_threadsafe)``, executors, signals, sockets, SSL, pipes and
subprocesses.  Upstream makes each loop with ``asyncio.SelectorEventLoop(...)``;
the port makes it with ``asyncio.new_event_loop()``, so it comes from the
installed policy: the default loop (epoll on Linux) with tickwheel's timers,
or asyncio's own with ``--upstream-target=stdlib``.  ``HandleTests`` and
``TimerTests`` test asyncio's own handle classes, not a loop, and are not run.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, policy_fixture

upstream = load("test_events")

# Upstream's class for the platform's default loop (with its own skips).
_NAMES = ("ProactorEventLoopTests",) if sys.platform == "win32" else ()
_NAMES += ("EPollEventLoopTests", "KqueueEventLoopTests", "SelectEventLoopTests")
_Base: Any = next(getattr(upstream, n) for n in _NAMES if hasattr(upstream, n))


class EventLoopTests(_Base):  # type: ignore[misc]
    """Upstream's real-loop tests; the loop comes from the installed policy."""

    def create_event_loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.new_event_loop()


del _Base  # pytest would collect the upstream class under this name too

SKIPS: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _policy(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from policy_fixture(request, SKIPS)
