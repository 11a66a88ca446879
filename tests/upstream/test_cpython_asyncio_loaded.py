"""The ports of CPython's asyncio tests load what this interpreter has.

``_cpython_asyncio.load`` returns None for a module the running Python
version does not have; this checks that such a module is really absent from
the interpreter's ``test`` package (and present on every version that has
it), so a missing ``test`` package or a wrong version bound fails here rather
than leaving a port with nothing to run.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from . import _cpython_asyncio as ca


@pytest.mark.parametrize("name", sorted(ca.MODULES))
def test_cpython_asyncio_module_loads_from_this_interpreter(name: str) -> None:
    since = ca.MODULES[name]
    module = ca.load(name)
    if since is not None and sys.version_info < since:
        assert module is None
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"test.test_asyncio.{name}")
    else:
        assert module is not None
        assert module.__name__ == f"test.test_asyncio.{name}"


def test_cpython_asyncio_ports_collect_upstream_classes() -> None:
    # Each port binds the upstream classes it runs; the eager TaskGroup class
    # is upstream from 3.14 (and later 3.13 patches) and must run then.
    from . import (
        test_cpython_asyncio_compat_timeouts as compat_timeouts,
    )
    from . import (
        test_cpython_asyncio_events as events,
    )
    from . import (
        test_cpython_asyncio_taskgroups as taskgroups,
    )
    from . import (
        test_cpython_asyncio_timeouts as timeouts,
    )
    from . import (
        test_cpython_asyncio_waitfor as waitfor,
    )

    assert waitfor.AsyncioWaitForTest.__module__ == "test.test_asyncio.test_waitfor"
    assert hasattr(waitfor, "WaitForShieldTests") == (sys.version_info >= (3, 12))
    assert issubclass(events.EventLoopTests, events.upstream.EventLoopTestsMixin)
    new_311 = sys.version_info >= (3, 11)
    assert hasattr(timeouts, "TimeoutTests") == new_311
    assert hasattr(compat_timeouts, "TimeoutTests") == new_311
    assert hasattr(taskgroups, "TestTaskGroup") == new_311
    eager = hasattr(taskgroups.upstream, "TestEagerTaskTaskGroup") if new_311 else False
    assert hasattr(taskgroups, "TestEagerTaskTaskGroup") == eager
    if sys.version_info >= (3, 14):
        assert eager
