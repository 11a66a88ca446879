"""One Spark session for all Spark tests (starting one costs 8-12 s).

``local[2]``, web UI off, no console progress bar, few shuffle partitions.
The tests are marked ``spark`` here (a tier: pyproject.toml registers it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

SPARK_TESTS_DIR = os.path.dirname(__file__)

# Every local JVM the tests start (the shared session, and each ``tickwheel
# replay`` run as a subprocess, through spark-submit's launcher) lives for
# seconds: the C1 compiler alone and the serial collector spend about 40 %
# less CPU on such a run than the JIT's and G1's defaults (measured in
# docs/development.md, "Test tiers").  A value set by the caller is kept.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config: pytest.Config) -> None:
    # Targeted: pyspark's own deprecation noise on import/arrow paths, which
    # filterwarnings=error would turn into failures of our tests.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:pyspark.*")
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:py4j.*")
    # matplotlib < 3.10 (which the extra still accepts) calls pyparsing's
    # camelCase names and arguments (enablePackrat, parseString, parseAll),
    # which pyparsing 3.3 deprecates; the warning points at matplotlib or at
    # pyparsing's own wrappers.  tickwheel does not use pyparsing, and
    # deprecations of tickwheel's matplotlib calls point at tickwheel and
    # still fail.
    for module in ("matplotlib", "pyparsing"):
        config.addinivalue_line(
            "filterwarnings", f"ignore::DeprecationWarning:{module}.*"
        )


@pytest.hookimpl(tryfirst=True)  # before -m deselects by this mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    # The cluster tests are a tier of their own (-m spark leaves them out).
    for item in items:
        if str(item.fspath).startswith(SPARK_TESTS_DIR) and not item.get_closest_marker(
            "cluster"
        ):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The shared local[2] SparkSession."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from tickwheel.spark import spark_session

    session = spark_session(
        "local[2]",
        "tickwheel-tests",
        ui=False,
        progress=False,
        shuffle_partitions=4,
        extra_conf={"spark.driver.memory": "1g", "spark.sql.session.timeZone": "UTC"},
    )
    yield session
    session.stop()
