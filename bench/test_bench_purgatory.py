"""The purgatory workload (bench_purgatory.py) as a pytest-benchmark entry.

``n`` requests (``--bench-n``) at 50,000/s with a 20 ms timeout, 3 keys from
100, 90% completing early, on tickwheel (CountdownOperation and a Python
subclass) and on the heapq baseline.  One
round is about n / 50,000 s of wall time (paced), so
``pytest bench --benchmark-disable --bench-n 2000`` is a quick smoke run;
the full numbers come from ``python bench/bench_purgatory.py --sweep``.
"""

from __future__ import annotations

import pytest
from bench_purgatory import Workload, run_once


@pytest.fixture(scope="module")
def workload(n: int) -> Workload:
    # pct75 6.72 ms with pct50 2 ms puts 90% of latencies under 20 ms.
    return Workload(n, 50_000.0, 20, 2.0, 6.72, 3, 100, seed=1)


@pytest.mark.parametrize("kind", ["tickwheel", "tickwheel-subclass", "heapq"])
@pytest.mark.benchmark(group="purgatory")
def test_purgatory_workload(benchmark, kind, workload):
    result = benchmark.pedantic(run_once, args=(kind, workload), rounds=3, iterations=1)
    benchmark.extra_info.update(result)
    # Every request ends exactly once; most end early.  (Achieved rate is
    # not asserted: it depends on the machine.)
    assert 0.5 < result["early"] <= 1.0

