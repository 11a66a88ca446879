"""W1 (add) and W2 (add + cancel) for tickwheel and its peers, in one run.

W1: schedule N timers with delays uniform in [1 ms, 30 s]; none fire.
W2: schedule a timer and cancel it at once, N times (the purgatory's steady
state: most operations complete long before their timeout).

Each round starts from a fresh timer (setup and teardown are not timed).
Ratios: ``python bench/report.py bench/results/<file>.json``.
"""

from __future__ import annotations

import gc

import pytest
from baselines import factories

IMPLS = list(factories())


def _cb() -> None:  # never runs: nothing fires during a round
    pass


def _rounds(name: str) -> int:
    return 3 if name == "tickwheel-py" else 7


@pytest.fixture
def made():
    """Every timer a test creates; all are closed at the end, timed or not
    (``--benchmark-disable`` runs the target once and skips the teardown)."""
    timers: list = []
    yield timers
    for timer in timers:
        timer.close()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.benchmark(group="W1-add")
def test_w1_add(benchmark, impl, delays, made):
    make = factories()[impl]

    def setup():
        gc.collect()
        made.append(make())
        return (made[-1].schedule, []), {}

    def run(schedule, handles):
        append = handles.append
        for d in delays:
            append(schedule(d, _cb))

    benchmark.extra_info["n"] = len(delays)
    benchmark.pedantic(
        run, setup=setup, teardown=lambda *a: made[-1].close(),
        rounds=_rounds(impl), iterations=1,
    )


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.benchmark(group="W2-add-cancel")
def test_w2_add_cancel(benchmark, impl, delays, made):
    make = factories()[impl]

    def setup():
        gc.collect()
        made.append(make())
        return (made[-1].schedule, made[-1].cancel), {}

    def run(schedule, cancel):
        for d in delays:
            cancel(schedule(d, _cb))

    benchmark.extra_info["n"] = len(delays)
    benchmark.pedantic(
        run, setup=setup, teardown=lambda *a: made[-1].close(),
        rounds=_rounds(impl), iterations=1,
    )
