"""Port of ``TimerTests`` from CPython's ``Lib/test/test_threading.py``
(identical in 3.11, 3.12 and 3.13), run against
``tickwheel.compat_threading.Timer`` or, with ``--upstream-target=stdlib``,
``threading.Timer``.

The upstream test keeps its name and body.  The adaptations:

* ``threading.Timer`` is spelled ``self.Timer``; an autouse fixture binds it
  to tickwheel's Timer or threading's (``threading.Event`` stays threading's);
* ``BaseTestCase``'s ``threading_setup``/``threading_cleanup`` (which warn
  when a test leaves threads behind) become ``no_thread_leak``, which fails
  the test; on the tickwheel target the shared timer's two threads are
  stopped with ``compat_threading.shutdown()`` first, since they outlive
  each Timer by design (see the README).  ``reap_children()`` is dropped:
  the test starts no processes.

No test is skipped.
"""

import threading
import unittest
from collections.abc import Iterator
from typing import Any

import pytest

from tickwheel import compat_threading


@pytest.fixture(autouse=True)
def _target(
    request: pytest.FixtureRequest, upstream_target: str, no_thread_leak: None
) -> Iterator[None]:
    stdlib = upstream_target == "stdlib"
    request.instance.Timer = threading.Timer if stdlib else compat_threading.Timer
    yield
    if not stdlib:
        compat_threading.shutdown()


class TimerTests(unittest.TestCase):
    Timer: Any

    def setUp(self):
        self.callback_args = []
        self.callback_event = threading.Event()

    def test_init_immutable_default_args(self):
        # CPython bpo-17435: constructor defaults were mutable objects, they
        # could be mutated via the object attributes and affect other Timer
        # objects.
        timer1 = self.Timer(0.01, self._callback_spy)
        timer1.start()
        self.callback_event.wait()
        timer1.args.append("blah")
        timer1.kwargs["foo"] = "bar"
        self.callback_event.clear()
        timer2 = self.Timer(0.01, self._callback_spy)
        timer2.start()
        self.callback_event.wait()
        self.assertEqual(len(self.callback_args), 2)
        self.assertEqual(self.callback_args, [((), {}), ((), {})])
        timer1.join()
        timer2.join()

    def _callback_spy(self, *args, **kwargs):
        self.callback_args.append((args[:], kwargs.copy()))
        self.callback_event.set()
