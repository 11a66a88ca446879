"""Concurrency stress at CI size: the code of ``tests/reliability/stress.py``, bounded.

8 threads add, cancel and re-add (move) tasks on a live SystemTimer while its
reaper fires, for each executor kind; then 8 threads submit, complete, check
and withdraw purgatory operations.  Every task is accounted for (ran once,
or cancelled and never ran; none early; ``len()`` back to 0) and a watchdog
dumps all thread stacks and fails the test if a run hangs.  The full
8 x 100,000 run is ``python tests/reliability/stress.py`` (figures in
docs/reliability.md).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parent / "reliability" / "stress.py"
_spec = importlib.util.spec_from_file_location("tickwheel_bench_stress", _PATH)
assert _spec is not None and _spec.loader is not None
stress = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = stress
_spec.loader.exec_module(stress)

pytestmark = [pytest.mark.slow, pytest.mark.stress]

THREADS, OPS = 8, 5_000
LIMIT_S = 60.0  # the watchdog: a CI run takes about a second


def _core(impl) -> str:
    return "pure" if impl.__name__.endswith("_py") else "c"


@pytest.mark.parametrize("executor", ["default", "inline", "pool"])
def test_stress_timer_accounts_for_every_task(impl, executor, no_thread_leak):
    fig = stress.run_timer_stress(
        _core(impl), THREADS, OPS, executor, seed=3, limit_s=LIMIT_S
    )
    assert fig["ops"] == THREADS * OPS
    assert (fig["lost"], fig["duplicates"], fig["early"], fig["len_after"]) == (
        0,
        0,
        0,
        0,
    )
    assert fig["ran_after_cancel"] == 0
    # The workload really mixed things: moves, cancels and runs all happened.
    assert fig["moves"] > 0 and fig["cancelled"] > 0 and fig["ran"] > 0


def test_stress_purgatory_accounts_for_every_operation(impl, no_thread_leak):
    fig = stress.run_purgatory_stress(
        _core(impl), THREADS, OPS, seed=4, limit_s=LIMIT_S
    )
    assert (fig["lost"], fig["lost_wakeups"], fig["duplicates"], fig["early"]) == (
        0,
        0,
        0,
        0,
    )
    assert (fig["watched_after"], fig["delayed_after"]) == (0, 0)
    assert fig["completed"] > 0 and fig["expired"] > 0 and fig["withdrawn"] > 0


def test_stress_watchdog_dumps_stacks_and_fails(capfd):
    """The watchdog itself: a thread that never finishes fails the run, with stacks."""
    import threading

    stop = threading.Event()
    stuck = threading.Thread(target=stop.wait, name="stress-stuck")
    stuck.start()
    try:
        with pytest.raises(stress.StressFailure, match="stress-stuck"):
            stress._watchdog([stuck], 0.2, "demo")
    finally:
        stop.set()
        stuck.join()
    assert "Thread 0x" in capfd.readouterr().err  # faulthandler's dump
