"""W1 (add), W2 (add + cancel) and W3-manual (expire) at ``--bench-n`` timers.

W1: schedule N timers with delays uniform in [1 ms, 30 s]; none fire.
W2-pair: schedule a timer and cancel it at once, N times.
W2-bulk: schedule N, then cancel all of them in random order.
W2-sliding: K = N/10 pending; each add cancels the timer added K adds
earlier (the purgatory's steady state: most operations finish early).
W3-manual: N timers due within a 500 ms window on a manual clock; the
timed part is the drain only: the CPU cost per expiry, with no sleeping.

Each round starts from a fresh timer (setup and teardown are not timed).
``sched`` joins where its O(n) cancel keeps a round under a few seconds.
"""

from __future__ import annotations

import gc
import random

import pytest
from baselines import (
    drain_heapq,
    drain_sched,
    drain_tickwheel,
    factories,
    loop_add,
    loop_sliding,
)

ALL = list(factories())
# sched.scheduler.cancel is O(n) (list.remove + heapify): it joins only the
# workloads where its queue stays tiny.
IMPLS = [name for name in ALL if name != "sched"]


def _cb() -> None:
    pass


def _rounds(name: str) -> int:
    return 3 if name in ("tickwheel-py", "sched") else 7


def _bench(benchmark, impl, made, run, args_for, n):
    make = factories()[impl]

    def setup():
        gc.collect()
        made.append(make())
        return args_for(made[-1]), {}

    benchmark.extra_info["n"] = n
    benchmark.pedantic(
        run,
        setup=setup,
        teardown=lambda *a: made[-1].close(),
        rounds=_rounds(impl),
        iterations=1,
    )


@pytest.mark.parametrize("impl", ALL)
@pytest.mark.benchmark(group="W1-add")
def test_w1_add(benchmark, impl, delays, made):
    def run(schedule):
        loop_add(schedule, delays, _cb)

    _bench(benchmark, impl, made, run, lambda t: (t.schedule,), len(delays))


@pytest.mark.parametrize("impl", ALL)
@pytest.mark.benchmark(group="W2-pair")
def test_w2_pair(benchmark, impl, delays, made):
    def run(schedule, cancel):
        for d in delays:
            cancel(schedule(d, _cb))

    _bench(benchmark, impl, made, run, lambda t: (t.schedule, t.cancel), len(delays))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.benchmark(group="W2-bulk")
def test_w2_bulk(benchmark, impl, delays, made):
    order = list(range(len(delays)))
    random.Random(11).shuffle(order)

    def run(schedule, cancel):
        handles = [schedule(d, _cb) for d in delays]
        for i in order:
            cancel(handles[i])

    _bench(
        benchmark, impl, made, run, lambda t: (t.schedule, t.cancel), 2 * len(delays)
    )


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.benchmark(group="W2-sliding")
def test_w2_sliding(benchmark, impl, delays, made):
    k = max(1, len(delays) // 10)

    def run(schedule, cancel):
        loop_sliding(schedule, cancel, delays, _cb, k)

    _bench(benchmark, impl, made, run, lambda t: (t.schedule, t.cancel), len(delays))


@pytest.mark.parametrize("impl", ["tickwheel", "tickwheel-py", "heapq", "sched"])
@pytest.mark.benchmark(group="W3-manual")
def test_w3_manual(benchmark, impl, n):
    from twins import twin_package

    from tickwheel import timer as tw

    rnd = random.Random(13)
    window = [1 + rnd.randrange(500) for _ in range(n)]
    fired = [0]

    def cb() -> None:
        fired[0] += 1

    def setup():
        gc.collect()
        if impl == "tickwheel":
            drain = drain_tickwheel(tw.MockTimer, window, cb)
        elif impl == "tickwheel-py":
            drain = drain_tickwheel(twin_package().MockTimer, window, cb)
        elif impl == "heapq":
            drain = drain_heapq(window, cb)
        else:
            drain = drain_sched(window, cb)
        return (drain,), {}

    benchmark.extra_info["n"] = n
    benchmark.pedantic(
        lambda drain: drain(), setup=setup, rounds=_rounds(impl), iterations=1
    )
    assert fired[0] % n == 0 and fired[0] > 0  # every round fired every timer
