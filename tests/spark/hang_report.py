"""Run a CLI subprocess that may start Spark; if it hangs, say where.

A plain ``subprocess.run(..., timeout=...)`` that times out kills the child and
leaves nothing to read but "timed out".  :func:`run` starts the child in its own
session and, on a timeout, before killing that session:

- prints ``jstack`` of every JVM in it (PySpark's driver JVM is a child of the
  Python process), and
- sends the Python process SIGABRT with ``PYTHONFAULTHANDLER`` set, so it
  dumps every thread's Python stack to stderr on its way out,

then fails the test with the child's output so far and those dumps.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

import pytest


def _session_pids(sid: int) -> list[int]:
    """The pids whose session is ``sid`` (Linux /proc; empty elsewhere)."""
    pids = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                # comm may hold spaces: the fields after its ")" are fixed.
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: session id
            pids.append(int(name))
    return pids


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def _jstacks(pids: Sequence[int]) -> str:
    jstack = shutil.which("jstack")
    parts = []
    for pid in pids:
        if _comm(pid) != "java":
            continue
        if jstack is None:
            parts.append(f"(JVM {pid}: no jstack on PATH)")
            continue
        try:
            done = subprocess.run(
                [jstack, str(pid)], capture_output=True, text=True, timeout=60
            )
            parts.append(f"--- jstack {pid}\n{done.stdout}{done.stderr}")
        except subprocess.TimeoutExpired:
            parts.append(f"(jstack {pid} timed out)")
    return "\n".join(parts)


def run(
    args: Sequence[str], env: dict[str, str] | None = None, timeout: float = 300
) -> tuple[int, str, str]:
    """``python ARGS``: (exit code, stdout, stderr); a hang fails with stacks."""
    run_env = dict(os.environ if env is None else env)
    run_env["PYTHONFAULTHANDLER"] = "1"
    proc = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=run_env,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        return proc.returncode, stdout, stderr
    except subprocess.TimeoutExpired:
        pass
    started = time.monotonic()
    stacks = _jstacks(_session_pids(proc.pid))
    proc.send_signal(signal.SIGABRT)  # faulthandler: all Python threads' stacks
    try:
        stdout, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    for pid in _session_pids(proc.pid):  # the JVM, if it outlived its parent
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pytest.fail(
        f"{' '.join(args)} did not end in {timeout:.0f} s (dumps took "
        f"{time.monotonic() - started:.0f} s)\n--- stdout\n{stdout[-20000:]}\n"
        f"--- stderr (Python stacks at the end)\n{stderr[-30000:]}\n{stacks[-60000:]}",
        pytrace=False,
    )
