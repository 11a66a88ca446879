"""W5: per-operation cost against N, for W1, W2-sliding and W3-manual.

A wheel's add is O(levels) and its cancel O(1); a heap's push is O(log n)
and a tombstone stays until its deadline.  The curves show whether the
per-operation cost stays flat as N grows from 10^3 to 10^6 (10^7 with
``--bench-sizes 1000,...,10000000``; only tickwheel and heapq go that far,
the others stop at 10^5).
"""

from __future__ import annotations

import gc
import random

import pytest
from baselines import drain_heapq, drain_tickwheel, factories, loop_add, loop_sliding

BIG_ONLY = ("tickwheel", "heapq")
ANY_N = ("tickwheel-py", "asyncio", "uvloop")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "scale" not in metafunc.fixturenames:
        return
    sizes = [int(x) for x in metafunc.config.getoption("--bench-sizes").split(",")]
    available = set(factories())
    params = []
    for n in sizes:
        for impl in BIG_ONLY + ANY_N:
            if impl not in available or (impl in ANY_N and n > 100_000):
                continue
            if metafunc.function.__name__ == "test_w5_expire" and impl in (
                "asyncio",
                "uvloop",
            ):
                continue  # no manual clock
            params.append(pytest.param((impl, n), id=f"{impl}-{n}"))
    metafunc.parametrize("scale", params)


def _rounds(n: int) -> int:
    return 7 if n <= 100_000 else (3 if n <= 1_000_000 else 1)


def _cb() -> None:
    pass


def _delays(n: int) -> list[int]:
    rnd = random.Random(17)
    return [rnd.randint(1, 30_000) for _ in range(n)]


def _run(benchmark, scale, made, body):
    impl, n = scale
    delays = _delays(n)
    make = factories()[impl]

    def setup():
        gc.collect()
        made.append(make())
        return (made[-1], delays), {}

    benchmark.extra_info.update(n=n, impl=impl)
    benchmark.pedantic(
        body,
        setup=setup,
        teardown=lambda *a: made[-1].close(),
        rounds=_rounds(n),
        iterations=1,
    )


@pytest.mark.benchmark(group="W5-add")
def test_w5_add(benchmark, scale, made):
    def body(timer, delays):
        return loop_add(timer.schedule, delays, _cb)

    _run(benchmark, scale, made, body)


@pytest.mark.benchmark(group="W5-sliding")
def test_w5_sliding(benchmark, scale, made):
    def body(timer, delays):
        loop_sliding(
            timer.schedule, timer.cancel, delays, _cb, max(1, len(delays) // 10)
        )

    _run(benchmark, scale, made, body)


@pytest.mark.benchmark(group="W5-expire")
def test_w5_expire(benchmark, scale):
    from twins import twin_package

    from tickwheel import timer as tw

    impl, n = scale
    rnd = random.Random(19)
    window = [1 + rnd.randrange(500) for _ in range(n)]

    def setup():
        gc.collect()
        if impl == "tickwheel":
            return (drain_tickwheel(tw.MockTimer, window, _cb),), {}
        if impl == "tickwheel-py":
            pure = twin_package().MockTimer
            return (drain_tickwheel(pure, window, _cb),), {}
        return (drain_heapq(window, _cb),), {}

    benchmark.extra_info.update(n=n, impl=impl)
    benchmark.pedantic(
        lambda drain: drain(), setup=setup, rounds=_rounds(n), iterations=1
    )
