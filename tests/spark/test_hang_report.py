"""tests/spark/hang_report.run: a child that hangs fails the test with its stacks."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import hang_report  # noqa: E402


def test_a_hung_child_fails_with_every_python_thread_stack() -> None:
    code = (
        "import threading, time\n"
        "def napping_helper():\n"
        "    time.sleep(60)\n"
        "threading.Thread(target=napping_helper, daemon=True).start()\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(pytest.fail.Exception) as failed:
        hang_report.run(["-c", code], timeout=2)
    text = str(failed.value)
    assert "did not end in 2 s" in text
    assert "started" in text  # the output so far
    assert "napping_helper" in text  # faulthandler's dump of the other thread


def test_a_child_that_ends_gives_its_code_and_output() -> None:
    code, out, err = hang_report.run(["-c", "import sys; print('hi'); sys.exit(3)"])
    assert (code, out, err) == (3, "hi\n", "")
