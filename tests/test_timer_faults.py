"""Faults around a live SystemTimer: fork() and interpreter exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@pytest.mark.slow
@pytest.mark.filterwarnings(
    "ignore:This process .* is multi-threaded:DeprecationWarning"
)
def test_fork_child_gets_working_timer_and_no_parent_tasks(timers, no_thread_leak):
    parent_ran = threading.Event()
    with timers.SystemTimer(name="forky") as timer:
        inherited = timer.schedule(300, parent_ran.set)
        pid = os.fork()
        if pid == 0:  # child: report through the exit code only
            code = 0
            try:
                if not inherited.cancelled or len(timer) != 0:
                    code = 2  # the parent's task must not run here
                done = threading.Event()
                timer.schedule(5, done.set)
                if not done.wait(10):
                    code = 3  # the child's timer must work
                if {t.name for t in timer.threads} != {
                    "forky-reaper",
                    "forky-executor",
                }:
                    code = 4
                timer.close()
            except BaseException:
                code = 5
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert parent_ran.wait(10)  # the parent's timer is untouched
        assert inherited.done


def test_exit_with_pending_timers_is_quiet_and_prompt():
    script = textwrap.dedent(
        """
        from twins import twin_package

        from tickwheel import SystemTimer
        for cls in (SystemTimer, twin_package().SystemTimer):
            timer = cls()
            for i in range(1000):
                timer.schedule(60_000 + i, print, "never")
            timer.schedule(0, lambda: None)
        print("bye")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).parent,  # where ``twins`` is
    )
    assert result.returncode == 0
    assert result.stdout == "bye\n"
    assert result.stderr == ""
