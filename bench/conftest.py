"""Benchmark fixtures.  ``bench/`` is outside the test paths on purpose.

Run: ``pytest bench --benchmark-only`` (see bench/README.md).
``--bench-n`` sets the number of timers per round (default 200,000).
"""

from __future__ import annotations

import random

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bench-n", type=int, default=200_000, help="timers per round")
    parser.addoption(
        "--bench-sizes",
        default="1000,10000,100000,1000000",
        help="comma-separated N for the W5 scaling curves (add 10000000 for 10^7)",
    )


@pytest.fixture(scope="session")
def n(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--bench-n"))


@pytest.fixture(scope="session")
def delays(n: int) -> list[int]:
    """W1/W2 delays: uniform in [1 ms, 30 s], fixed seed."""
    rnd = random.Random(20261122)
    return [rnd.randint(1, 30_000) for _ in range(n)]


@pytest.fixture
def made():
    """Every timer a benchmark creates; all are closed at the end, timed or not
    (``--benchmark-disable`` runs the target once and skips the teardown)."""
    timers: list = []
    yield timers
    for timer in timers:
        timer.close()
