"""Shared fixtures: both core implementations, and the public classes on each.

``base``: the base event loop class a tickwheel event loop builds on, once per
base (asyncio's default loop, ``uvloop.Loop``), for the tickwheel loop tests.

The ``c-extension`` variants import ``tickwheel._wheel`` directly, so a build
that silently fell back to pure Python fails here instead of testing the twin
twice.  ``--no-c-extensions`` (or ``TICKWHEEL_NO_EXTENSIONS=1``) deselects them.
The ``pure-python`` variants of a compiled run get the public classes from
``twins.twin_package()`` (see :func:`package_for`).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
from types import ModuleType
from typing import Any

import pytest

NO_EXT_ENV = os.environ.get("TICKWHEEL_NO_EXTENSIONS", "") not in ("", "0")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-c-extensions",
        action="store_true",
        default=False,
        help="run only the pure-Python implementation",
    )
    parser.addoption(
        "--upstream-target",
        choices=("tickwheel", "stdlib"),
        default="tickwheel",
        help=(
            "what the ported upstream drop-in suites (tests/upstream/) run "
            "against: tickwheel's drop-ins (default) or the stdlib originals, "
            "to show that a port itself is right"
        ),
    )


def _no_ext(config: pytest.Config) -> bool:
    return bool(config.getoption("--no-c-extensions")) or NO_EXT_ENV


def pytest_configure(config: pytest.Config) -> None:
    if _no_ext(config):
        return
    import tickwheel

    if not tickwheel.USE_EXTENSIONS:
        raise pytest.UsageError(
            "tickwheel was imported without its C extension, but the test run "
            "expects it (build it with `pip install .`, or run with "
            "--no-c-extensions / TICKWHEEL_NO_EXTENSIONS=1)"
        )


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    if not _no_ext(config):
        return
    # Deselect (not skip): the pure-Python pass does not claim to test them.
    keep = [item for item in items if "c_extension" not in item.keywords]
    dropped = [item for item in items if "c_extension" in item.keywords]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    # The pure-python variants of the tests parametrised over both cores ran
    # in the compiled pass already (on twins.twin_package()): in this pass
    # they are the twin_full tier (docs/development.md, "Test tiers").
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("impl") == PURE_CORE:
            item.add_marker(pytest.mark.twin_full)


PURE_CORE = "tickwheel._wheel_py"
IMPLS = [
    pytest.param("tickwheel._wheel", id="c-extension", marks=pytest.mark.c_extension),
    pytest.param(PURE_CORE, id="pure-python"),
]


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The core module: ``tickwheel._wheel`` or ``tickwheel._wheel_py``."""
    return importlib.import_module(request.param)


try:
    import uvloop
except ImportError:  # pragma: no cover (Windows: no uvloop)
    uvloop = None

#: The base loops under test: None is asyncio's default loop class.
BASE_LOOPS = [
    pytest.param(None, id="asyncio"),
    pytest.param(
        "uvloop",
        id="uvloop",
        marks=pytest.mark.skipif(uvloop is None, reason="uvloop is not installed"),
    ),
]


@pytest.fixture(params=BASE_LOOPS)
def base(request: pytest.FixtureRequest) -> type[asyncio.AbstractEventLoop] | None:
    """The base loop class for ``tw.new_event_loop(base)``/``tw.run(...,
    loop_class=base)``: None (asyncio's default loop) or ``uvloop.Loop``."""
    return None if request.param is None else uvloop.Loop


def package_for(core: ModuleType) -> ModuleType:
    """``tickwheel`` built on ``core``: the package itself, or its twin copy.

    The public classes exist once per process, on the core ``tickwheel._impl``
    chose; to run a test on the other core in the same process this takes
    ``twin_package()``, a copy of the public modules built on the twins
    (the twin modules themselves are shared, so ``core.TimerTask`` is the
    copy's ``TimerTask``).
    """
    from twins import twin_package

    import tickwheel
    from tickwheel import _impl

    if core is _impl.core:
        importlib.import_module("tickwheel.kafka")  # as twin_package() does
        return tickwheel
    assert core.__name__.endswith("_py"), core
    return twin_package()


class Timers:
    """The public modules and timers built on one core implementation."""

    def __init__(self, core: ModuleType) -> None:
        self.core = core
        self.package = package_for(core)
        self.TimerTask = core.TimerTask
        self.MockTimer: Any = self.package.MockTimer
        self.SystemTimer: Any = self.package.SystemTimer
        self.timer: Any = self.package.timer
        self.purgatory: Any = self.package.purgatory
        self.kafka: Any = self.package.kafka


@pytest.fixture
def timers(impl: ModuleType) -> Timers:
    return Timers(impl)


class FakeClock:
    """A nanosecond clock that only moves when told to."""

    def __init__(self, start_ms: int = 1_000) -> None:
        self.ns = start_ms * 1_000_000

    def __call__(self) -> int:
        return self.ns

    def advance_ms(self, ms: float) -> None:
        self.ns += int(ms * 1_000_000)


@pytest.fixture(scope="session")
def upstream_target(request: pytest.FixtureRequest) -> str:
    """``"tickwheel"`` or ``"stdlib"``: see ``--upstream-target``."""
    return str(request.config.getoption("--upstream-target"))


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def no_thread_leak():
    """Fail if a test leaves a thread it started alive."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leaked, f"threads left alive: {leaked}"


from hypothesis import settings as _hyp_settings  # noqa: E402

# "ci" is the default; `pytest --hypothesis-profile=long` for a deep run.
_hyp_settings.register_profile("ci", max_examples=150, deadline=None)
_hyp_settings.register_profile("long", max_examples=5_000, deadline=None)
_hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
