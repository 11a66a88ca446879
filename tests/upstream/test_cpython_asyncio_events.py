"""CPython's ``test_asyncio/test_events.py``: its real-loop tests on tickwheel.

``EventLoopTestsMixin`` and ``SubprocessTestsMixin`` (run by upstream as
``EPollEventLoopTests`` etc.) drive a real selector loop: timers
(``test_call_later``, ``test_run_until_complete``, ``test_timeout_rounding``),
``call_soon(_threadsafe)``, executors, signals, sockets, SSL, pipes and
subprocesses.  Upstream makes each loop with ``asyncio.SelectorEventLoop(...)``;
the port makes a tickwheel loop over the default loop class (epoll on Linux)
through ``_cpython_asyncio``'s factory, or upstream's own loop with
``--upstream-target=stdlib``.  ``HandleTests`` and
``TimerTests`` test asyncio's own handle classes, not a loop, and are not run.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ._cpython_asyncio import load, loop_fixture

upstream = load("test_events")
assert upstream is not None

# Upstream's class for the platform's default loop (with its own skips).
_NAMES = ("ProactorEventLoopTests",) if sys.platform == "win32" else ()
_NAMES += ("EPollEventLoopTests", "KqueueEventLoopTests", "SelectEventLoopTests")
_Base: Any = next(getattr(upstream, n) for n in _NAMES if hasattr(upstream, n))


class EventLoopTests(_Base):  # type: ignore[misc]
    """Upstream's real-loop tests; the loop comes from ``loop_fixture``."""

    loop_factory: Any = None  # set per test by loop_fixture

    def create_event_loop(self) -> asyncio.AbstractEventLoop:
        if self.loop_factory is None:  # --upstream-target=stdlib
            return super().create_event_loop()  # type: ignore[no-any-return]
        return self.loop_factory()  # type: ignore[no-any-return]


del _Base  # pytest would collect the upstream class under this name too

SKIPS: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _older_objects_frozen() -> Iterator[None]:
    """Upstream's tearDown runs three full collections per test
    (``support.gc_collect``).  In a worker that has run the rest of the suite
    (PySpark, pandas, hypothesis: ~860,000 tracked objects) each took
    0.5-0.7 s, so this module cost 150-300 s of a worker's time instead of
    8 s.  Objects older than the module are moved out of the collector's
    reach while it runs (``gc.freeze``); everything the tests make is still
    collected, which is what those calls are for.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(autouse=True)
def _loops(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from loop_fixture(request, SKIPS)
