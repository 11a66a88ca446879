"""Port of CPython's ``Lib/test/test_sched.py`` (3.11, 3.12 and 3.13 ship the
same file), run against ``tickwheel.compat_sched`` or, with
``--upstream-target=stdlib``, the ``sched`` module itself.

Every upstream test is here under its own name, in its upstream class
(``TestCase``), with its upstream body.  The adaptations:

* ``sched.scheduler`` is spelled ``self.sched.scheduler``; an autouse fixture
  binds ``self.sched`` to ``tickwheel.compat_sched`` or to ``sched``;
* ``test.support`` is not imported (some Python builds ship without the
  ``test`` package): ``TIMEOUT`` is ``support.SHORT_TIMEOUT``'s default, 30 s,
  and ``join_thread`` is ``threading_helper.join_thread``'s body;
  ``@threading_helper.requires_working_threading()`` is dropped, since
  tickwheel needs threads anyway;
* threads left alive by a test fail it (``no_thread_leak``), where upstream's
  ``threading_cleanup`` only warns;
* the two ``*_concurrent`` tests run ``scheduler.run`` on a daemon thread:
  when an assertion fails, that thread waits on the fake clock forever, and
  a non-daemon one would hang the whole test run at exit.

No test is skipped: tickwheel's scheduler passes all of them, on every
Python, and so does the stdlib's.
"""

import queue
import sched
import threading
import time
import unittest
from types import ModuleType

import pytest

from tickwheel import compat_sched

TIMEOUT = 30.0  # test.support.SHORT_TIMEOUT


def join_thread(thread, timeout=None):
    """test.support.threading_helper.join_thread."""
    if timeout is None:
        timeout = TIMEOUT
    thread.join(timeout)
    if thread.is_alive():
        msg = f"failed to join the thread in {timeout:.1f} seconds"
        raise AssertionError(msg)


class Timer:
    def __init__(self):
        self._cond = threading.Condition()
        self._time = 0
        self._stop = 0

    def time(self):
        with self._cond:
            return self._time

    # increase the time but not beyond the established limit
    def sleep(self, t):
        assert t >= 0
        with self._cond:
            t += self._time
            while self._stop < t:
                self._time = self._stop
                self._cond.wait()
            self._time = t

    # advance time limit for user code
    def advance(self, t):
        assert t >= 0
        with self._cond:
            self._stop += t
            self._cond.notify_all()


@pytest.fixture(autouse=True)
def _target(
    request: pytest.FixtureRequest, upstream_target: str, no_thread_leak: None
) -> None:
    module: ModuleType = sched if upstream_target == "stdlib" else compat_sched
    request.instance.sched = module


class TestCase(unittest.TestCase):
    sched: ModuleType

    def test_enter(self):
        l = []  # noqa: E741 - upstream's name
        fun = lambda x: l.append(x)  # noqa: E731
        scheduler = self.sched.scheduler(time.time, time.sleep)
        for x in [0.5, 0.4, 0.3, 0.2, 0.1]:
            z = scheduler.enter(x, 1, fun, (x,))  # noqa: F841
        scheduler.run()
        self.assertEqual(l, [0.1, 0.2, 0.3, 0.4, 0.5])

    def test_enterabs(self):
        l = []  # noqa: E741
        fun = lambda x: l.append(x)  # noqa: E731
        scheduler = self.sched.scheduler(time.time, time.sleep)
        for x in [0.05, 0.04, 0.03, 0.02, 0.01]:
            z = scheduler.enterabs(x, 1, fun, (x,))  # noqa: F841
        scheduler.run()
        self.assertEqual(l, [0.01, 0.02, 0.03, 0.04, 0.05])

    def test_enter_concurrent(self):
        q = queue.Queue()
        fun = q.put
        timer = Timer()
        scheduler = self.sched.scheduler(timer.time, timer.sleep)
        scheduler.enter(1, 1, fun, (1,))
        scheduler.enter(3, 1, fun, (3,))
        t = threading.Thread(target=scheduler.run, daemon=True)  # adapted
        t.start()
        timer.advance(1)
        self.assertEqual(q.get(timeout=TIMEOUT), 1)
        self.assertTrue(q.empty())
        for x in [4, 5, 2]:
            z = scheduler.enter(x - 1, 1, fun, (x,))  # noqa: F841
        timer.advance(2)
        self.assertEqual(q.get(timeout=TIMEOUT), 2)
        self.assertEqual(q.get(timeout=TIMEOUT), 3)
        self.assertTrue(q.empty())
        timer.advance(1)
        self.assertEqual(q.get(timeout=TIMEOUT), 4)
        self.assertTrue(q.empty())
        timer.advance(1)
        self.assertEqual(q.get(timeout=TIMEOUT), 5)
        self.assertTrue(q.empty())
        timer.advance(1000)
        join_thread(t)
        self.assertTrue(q.empty())
        self.assertEqual(timer.time(), 5)

    def test_priority(self):
        l = []  # noqa: E741
        fun = lambda x: l.append(x)  # noqa: E731
        scheduler = self.sched.scheduler(time.time, time.sleep)

        cases = [
            ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
            ([5, 4, 3, 2, 1], [1, 2, 3, 4, 5]),
            ([2, 5, 3, 1, 4], [1, 2, 3, 4, 5]),
            ([1, 2, 3, 2, 1], [1, 1, 2, 2, 3]),
        ]
        for priorities, expected in cases:
            with self.subTest(priorities=priorities, expected=expected):
                for priority in priorities:
                    scheduler.enterabs(0.01, priority, fun, (priority,))
                scheduler.run()
                self.assertEqual(l, expected)

                # Cleanup:
                self.assertTrue(scheduler.empty())
                l.clear()

    def test_cancel(self):
        l = []  # noqa: E741
        fun = lambda x: l.append(x)  # noqa: E731
        scheduler = self.sched.scheduler(time.time, time.sleep)
        now = time.time()
        event1 = scheduler.enterabs(now + 0.01, 1, fun, (0.01,))
        event2 = scheduler.enterabs(now + 0.02, 1, fun, (0.02,))  # noqa: F841
        event3 = scheduler.enterabs(now + 0.03, 1, fun, (0.03,))  # noqa: F841
        event4 = scheduler.enterabs(now + 0.04, 1, fun, (0.04,))  # noqa: F841
        event5 = scheduler.enterabs(now + 0.05, 1, fun, (0.05,))
        scheduler.cancel(event1)
        scheduler.cancel(event5)
        scheduler.run()
        self.assertEqual(l, [0.02, 0.03, 0.04])

    def test_cancel_concurrent(self):
        q = queue.Queue()
        fun = q.put
        timer = Timer()
        scheduler = self.sched.scheduler(timer.time, timer.sleep)
        now = timer.time()
        event1 = scheduler.enterabs(now + 1, 1, fun, (1,))  # noqa: F841
        event2 = scheduler.enterabs(now + 2, 1, fun, (2,))
        event4 = scheduler.enterabs(now + 4, 1, fun, (4,))  # noqa: F841
        event5 = scheduler.enterabs(now + 5, 1, fun, (5,))
        event3 = scheduler.enterabs(now + 3, 1, fun, (3,))  # noqa: F841
        t = threading.Thread(target=scheduler.run, daemon=True)  # adapted
        t.start()
        timer.advance(1)
        self.assertEqual(q.get(timeout=TIMEOUT), 1)
        self.assertTrue(q.empty())
        scheduler.cancel(event2)
        scheduler.cancel(event5)
        timer.advance(1)
        self.assertTrue(q.empty())
        timer.advance(1)
        self.assertEqual(q.get(timeout=TIMEOUT), 3)
        self.assertTrue(q.empty())
        timer.advance(1)
        self.assertEqual(q.get(timeout=TIMEOUT), 4)
        self.assertTrue(q.empty())
        timer.advance(1000)
        join_thread(t)
        self.assertTrue(q.empty())
        self.assertEqual(timer.time(), 4)

    def test_cancel_correct_event(self):
        # bpo-19270
        events = []
        scheduler = self.sched.scheduler()
        scheduler.enterabs(1, 1, events.append, ("a",))
        b = scheduler.enterabs(1, 1, events.append, ("b",))
        scheduler.enterabs(1, 1, events.append, ("c",))
        scheduler.cancel(b)
        scheduler.run()
        self.assertEqual(events, ["a", "c"])

    def test_empty(self):
        l = []  # noqa: E741
        fun = lambda x: l.append(x)  # noqa: E731
        scheduler = self.sched.scheduler(time.time, time.sleep)
        self.assertTrue(scheduler.empty())
        for x in [0.05, 0.04, 0.03, 0.02, 0.01]:
            z = scheduler.enterabs(x, 1, fun, (x,))  # noqa: F841
        self.assertFalse(scheduler.empty())
        scheduler.run()
        self.assertTrue(scheduler.empty())

    def test_queue(self):
        l = []  # noqa: E741
        fun = lambda x: l.append(x)  # noqa: E731
        scheduler = self.sched.scheduler(time.time, time.sleep)
        now = time.time()
        e5 = scheduler.enterabs(now + 0.05, 1, fun)
        e1 = scheduler.enterabs(now + 0.01, 1, fun)
        e2 = scheduler.enterabs(now + 0.02, 1, fun)
        e4 = scheduler.enterabs(now + 0.04, 1, fun)
        e3 = scheduler.enterabs(now + 0.03, 1, fun)
        # queue property is supposed to return an order list of
        # upcoming events
        self.assertEqual(scheduler.queue, [e1, e2, e3, e4, e5])

    def test_args_kwargs(self):
        seq = []

        def fun(*a, **b):
            seq.append((a, b))

        now = time.time()
        scheduler = self.sched.scheduler(time.time, time.sleep)
        scheduler.enterabs(now, 1, fun)
        scheduler.enterabs(now, 1, fun, argument=(1, 2))
        scheduler.enterabs(now, 1, fun, argument=("a", "b"))
        scheduler.enterabs(now, 1, fun, argument=(1, 2), kwargs={"foo": 3})
        scheduler.run()
        self.assertCountEqual(
            seq, [((), {}), ((1, 2), {}), (("a", "b"), {}), ((1, 2), {"foo": 3})]
        )

    def test_run_non_blocking(self):
        l = []  # noqa: E741
        fun = lambda x: l.append(x)  # noqa: E731
        scheduler = self.sched.scheduler(time.time, time.sleep)
        for x in [10, 9, 8, 7, 6]:
            scheduler.enter(x, 1, fun, (x,))
        scheduler.run(blocking=False)
        self.assertEqual(l, [])
