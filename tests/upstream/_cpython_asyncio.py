"""Run CPython's own asyncio tests (``test.test_asyncio``) on the tickwheel loop.

The ports in ``test_cpython_asyncio_*.py`` import the upstream test classes
from the running interpreter's ``Lib/test/test_asyncio/`` (so 3.11, 3.12 and
3.13 each run their own version, test names unchanged) and run them with
:func:`tickwheel_policy` installed: every loop that ``asyncio.run``,
``asyncio.Runner``, ``IsolatedAsyncioTestCase`` or ``asyncio.new_event_loop``
makes is a tickwheel event loop, so every ``call_later``/``call_at`` of the
tests and of asyncio itself (``sleep``, ``wait_for``, ``timeout``) runs on the
wheel.  With ``--upstream-target=stdlib`` the same tests run under asyncio's
own policy, which checks the port itself.

A deliberate difference is an entry in a port's ``SKIPS`` (test name ->
reason), skipped on tickwheel only; everything else must pass.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tickwheel import compat_asyncio as tw
from tickwheel._asyncio_loop import _TickwheelLoop


def load(name: str, since: tuple[int, int] | None = None) -> ModuleType:
    """``test.test_asyncio.<name>`` of this interpreter, or skip the port module."""
    import sys

    if since is not None and sys.version_info < since:
        pytest.skip(
            f"{name} is new in Python {since[0]}.{since[1]}", allow_module_level=True
        )
    try:
        return importlib.import_module(f"test.test_asyncio.{name}")
    except ImportError as exc:  # e.g. a distribution without the test package
        pytest.skip(
            f"CPython's test package is not installed: {exc}", allow_module_level=True
        )


class RecordingPolicy(tw.EventLoopPolicy):
    """tw.EventLoopPolicy that remembers the loops it made."""

    def __init__(self, loop_class: Any = None) -> None:
        super().__init__(loop_class=loop_class)
        self.made: list[asyncio.AbstractEventLoop] = []

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        self.made.append(loop)
        return loop


def policy_fixture(
    request: pytest.FixtureRequest,
    skips: dict[str, str],
    loop_class: Any = None,
    stdlib_policy: Any = None,
) -> Iterator[Any]:
    """Install the policy for one upstream test; check the test used its loops.

    :param loop_class: the base loop class of the tickwheel loops
    :param stdlib_policy: the policy class of ``--upstream-target=stdlib``
        (default: asyncio's)
    """
    stdlib = request.config.getoption("--upstream-target") == "stdlib"
    name = request.node.name
    if not stdlib and name in skips:
        pytest.skip(skips[name])
    policy: Any
    if stdlib:
        policy = (stdlib_policy or asyncio.DefaultEventLoopPolicy)()
    else:
        policy = RecordingPolicy(loop_class)
    asyncio.set_event_loop_policy(policy)
    try:
        yield policy
    finally:
        asyncio.set_event_loop_policy(None)  # what the modules' tearDownModule do
    if stdlib:
        return
    # Proof that the test ran on tickwheel loops, and that none leaked.
    assert policy.made, "the test made no event loop through the policy"
    for loop in policy.made:
        assert isinstance(loop, _TickwheelLoop)
        if not loop.is_closed():
            loop.close()
