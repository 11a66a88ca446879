"""Run CPython's own asyncio tests (``test.test_asyncio``) on the tickwheel loop.

The ports in ``test_cpython_asyncio_*.py`` import the upstream test classes
from the running interpreter's own ``test`` package (``Lib/test/test_asyncio/``;
Debian ships it as ``libpython3.X-testsuite``), so 3.10 to 3.15 each run their
own version, test names and bodies unchanged, and :func:`loop_fixture` runs
every test on tickwheel event loops:

* ``IsolatedAsyncioTestCase`` on 3.13+ (it has ``loop_factory``): the test
  instance's ``loop_factory`` becomes a factory of tickwheel loops.  If the
  upstream class has a ``loop_factory`` of its own (3.13.x and 3.14+'s
  ``test_taskgroups``: ``asyncio.EventLoop``, and for
  ``TestEagerTaskTaskGroup`` an ``asyncio.EventLoop`` with the eager task
  factory), each tickwheel loop gets the task factory the upstream one made.
  No event loop policy is touched (policies are deprecated from 3.14).
* ``IsolatedAsyncioTestCase`` before 3.13 (no ``loop_factory``): a
  ``tw.EventLoopPolicy`` is installed for the test; policies are not
  deprecated there.
* ``test_events``' real-loop tests: the port's ``create_event_loop`` calls
  the same factory.

Every loop the factory makes is recorded, and the fixture fails a test that
made none, so a test cannot pass on asyncio's own loop by accident.  With
``--upstream-target=stdlib`` the same tests run on asyncio's (or uvloop's)
own loops, which checks the port itself.

A module or class that cannot be loaded fails (a collection error), never a
skip: CI must not go green on an interpreter without its ``test`` package.
``load(name, since=...)`` returns None only for a module that interpreter
version does not have (``test_timeouts`` and ``test_taskgroups`` are new in
3.11); ``test_cpython_asyncio_loaded.py`` checks that each one is really
absent there and present everywhere else.

A deliberate difference is an entry in a port's ``SKIPS`` (test name ->
reason), skipped on tickwheel only; everything else must pass.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
import sysconfig
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tickwheel import compat_asyncio as tw
from tickwheel._asyncio_loop import EventLoopPolicy, _TickwheelLoop

# unittest.IsolatedAsyncioTestCase.loop_factory is new in 3.13.
HAS_LOOP_FACTORY = hasattr(unittest.IsolatedAsyncioTestCase, "loop_factory")

# The upstream modules the ports import, and the version each is new in.
MODULES: dict[str, tuple[int, int] | None] = {
    "test_events": None,
    "test_waitfor": None,
    "test_timeouts": (3, 11),
    "test_taskgroups": (3, 11),
}


def load(name: str) -> ModuleType | None:
    """``test.test_asyncio.<name>`` of this interpreter's own stdlib.

    :return: the module, or None if this Python version has no such module
    :raises ImportError: if the module should exist but cannot be imported
        (e.g. a distribution without its ``test`` package): the port then
        fails to collect, which fails the run
    """
    since = MODULES[name]
    if since is not None and sys.version_info < since:
        return None
    module = importlib.import_module(f"test.test_asyncio.{name}")
    stdlib = Path(sysconfig.get_path("stdlib")).resolve()
    where = Path(str(module.__file__)).resolve()
    if stdlib not in where.parents:
        raise ImportError(
            f"test.test_asyncio.{name} comes from {where}, not from this "
            f"interpreter's stdlib {stdlib}"
        )
    return module


class Loops:
    """Makes the loops of one test and remembers them."""

    def __init__(self, loop_class: Any = None, tickwheel: bool = True) -> None:
        self.loop_class = loop_class
        self.tickwheel = tickwheel
        self.made: list[asyncio.AbstractEventLoop] = []

    def factory(
        self, upstream: Callable[[], asyncio.AbstractEventLoop] | None = None
    ) -> Callable[[], asyncio.AbstractEventLoop]:
        """A loop factory; ``upstream``: the test class's own loop_factory."""

        def make() -> asyncio.AbstractEventLoop:
            if self.tickwheel:
                loop = tw.new_event_loop(self.loop_class)
            else:
                loop = self.loop_class()
            self.made.append(loop)
            if upstream is not None:
                loop.set_task_factory(_task_factory_of(upstream))
            return loop

        return make


def _task_factory_of(upstream: Callable[[], asyncio.AbstractEventLoop]) -> Any:
    """The task factory of the loop the upstream ``loop_factory`` makes.

    Upstream's factories make asyncio's default loop and at most set a task
    factory on it; anything else fails here, to be looked at.
    """
    reference = upstream()
    try:
        expected = getattr(asyncio, "EventLoop", None)
        if type(reference) is not expected:
            raise AssertionError(
                f"upstream's loop_factory {upstream!r} made a "
                f"{type(reference).__qualname__}, not asyncio.EventLoop: "
                "review the port"
            )
        return reference.get_task_factory()
    finally:
        reference.close()


class _RecordingPolicy(EventLoopPolicy):  # type: ignore[misc]
    """tw.EventLoopPolicy whose new loops come from ``loops`` (before 3.13)."""

    def __init__(self, loops: Loops) -> None:
        super().__init__(loop_class=loops.loop_class)
        self._loops = loops

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return self._loops.factory()()


def loop_fixture(
    request: pytest.FixtureRequest,
    skips: dict[str, str],
    loop_class: Any = None,
    stdlib_loop_class: Any = None,
    stdlib_policy: Any = None,
) -> Iterator[Loops | None]:
    """Run one upstream test on tickwheel loops; check it used them.

    :param loop_class: the base loop class of the tickwheel loops
    :param stdlib_loop_class: with ``--upstream-target=stdlib``, the loop
        class to run on instead of upstream's (e.g. ``uvloop.Loop``)
    :param stdlib_policy: the same before 3.13, as a policy class
    """
    stdlib = request.config.getoption("--upstream-target") == "stdlib"
    name = request.node.name
    if not stdlib and name in skips:
        pytest.skip(skips[name])
    instance = request.instance
    loops: Loops | None = None
    if not stdlib:
        loops = Loops(loop_class)
    elif stdlib_loop_class is not None:
        loops = Loops(stdlib_loop_class, tickwheel=False)
    if isinstance(instance, unittest.IsolatedAsyncioTestCase) and not HAS_LOOP_FACTORY:
        policy: Any = None
        if loops is not None and loops.tickwheel:
            policy = _RecordingPolicy(loops)
        elif stdlib_policy is not None:
            policy = stdlib_policy()
        asyncio.set_event_loop_policy(policy)  # not deprecated before 3.14
        try:
            yield loops
        finally:
            asyncio.set_event_loop_policy(None)
    else:
        if loops is not None:
            upstream = getattr(type(instance), "loop_factory", None)
            # An instance attribute: no method binding, and the class (shared
            # with the other ports importing it) is left as it is.
            instance.loop_factory = loops.factory(upstream)
        yield loops
    if loops is None or not loops.tickwheel:
        return
    # Proof that the test ran on tickwheel loops, and that none leaked.
    assert loops.made, "the test made no tickwheel event loop"
    for loop in loops.made:
        assert isinstance(loop, _TickwheelLoop)
        if not loop.is_closed():
            loop.close()
