"""CPython's ``test_asyncio/test_timeouts.py`` (3.11+) on ``compat_asyncio.timeout``.

The running interpreter's own ``TimeoutTests``, unmodified, with the
``asyncio`` its module sees replaced (per test, by ``monkeypatch``) by a copy
of asyncio whose ``timeout`` and ``timeout_at`` are tickwheel's, on tickwheel
loops: so ``timeout()`` is checked against the ``asyncio.timeout`` tests of
every Python it runs on (3.14's and 3.15's included), not a stored copy.
``test_asyncio_timeouts.py`` is the hand port of the 3.11-3.13 file.  With
``--upstream-target=stdlib`` the module is left alone (asyncio's own).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from typing import Any

import pytest

from tickwheel import compat_asyncio as tw

from ._cpython_asyncio import load, loop_fixture

upstream = load("test_timeouts")
if upstream is not None:  # None on 3.10 (no asyncio.timeout to follow)
    TimeoutTests = upstream.TimeoutTests

SKIPS: dict[str, str] = {}


def _asyncio_with_tickwheel_timeouts() -> types.ModuleType:
    module = types.ModuleType("asyncio", asyncio.__doc__)
    module.__dict__.update(vars(asyncio))
    module.timeout = tw.timeout  # type: ignore[attr-defined]
    module.timeout_at = tw.timeout_at  # type: ignore[attr-defined]
    return module


@pytest.fixture(autouse=True)
def _loops(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    assert upstream is not None
    if request.config.getoption("--upstream-target") != "stdlib":
        assert upstream.asyncio is asyncio
        monkeypatch.setattr(upstream, "asyncio", _asyncio_with_tickwheel_timeouts())
    yield from loop_fixture(request, SKIPS)
