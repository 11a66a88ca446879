"""The import of the shipped sample, against what main (c76dfaf) wrote.

The import's plan (one parse, one window, counts from the cache) may
change for speed; its output must not.  ``tests/data/request-sample.import.json``
is the fingerprint of c76dfaf's import of ``tests/data/request-sample.log.gz``
(default options): each table's schema, row count and a digest of its rows
(sorted, so file layout and row order do not matter), and ``summary.json``
without its settings.  On a mismatch, compare the two outputs row by row
with ``python bench/compare_import.py OLD NEW`` (in git history:
``git checkout 65a0ae3 -- bench/compare_import.py``).

Regenerate (only for an intended change of the output, and say why in the
commit): ``python tests/spark/test_import_golden.py OUTPUT >
tests/data/request-sample.import.json`` for an OUTPUT of that import.

The same import also counts its Spark jobs: the summary does not re-read
what was just written, and the window runs once.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent.parent / "data"
SAMPLE = DATA / "request-sample.log.gz"
GOLDEN = DATA / "request-sample.import.json"
#: Spark jobs of one import of the sample, AQE stages included (c76dfaf: 18).
MAX_JOBS = 9


def fingerprint(output: str) -> dict[str, Any]:
    """Schemas, row counts and row digests of an import's tables, and its summary."""
    import pyarrow.parquet as pq

    result: dict[str, Any] = {}
    for name in ("events", "skipped"):
        table = pq.read_table(os.path.join(output, name))
        rows = sorted(json.dumps(r, sort_keys=True) for r in table.to_pylist())
        result[name] = {
            "schema": [f"{f.name}: {f.type}" for f in table.schema],
            "rows": len(rows),
            "sha256": hashlib.sha256("\n".join(rows).encode()).hexdigest(),
        }
    with open(os.path.join(output, "summary.json")) as fh:
        summary = json.load(fh)
    summary.pop("settings")
    result["summary"] = summary
    return result


@pytest.fixture(scope="module")
def sample_import(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tickwheel.spark.request_log import run_import

    out = tmp_path_factory.mktemp("golden") / "out"
    sc = spark.sparkContext
    sc.setJobGroup("test-import-golden", "import of the shipped sample")
    try:
        run_import([str(SAMPLE)], str(out), spark=spark, out=io.StringIO())
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    jobs = sc.statusTracker().getJobIdsForGroup("test-import-golden")
    return out, len(jobs)


def test_sample_import_matches_main(sample_import: Any) -> None:
    out, _ = sample_import
    want = json.loads(GOLDEN.read_text())
    got = fingerprint(str(out))
    for name in ("events", "skipped"):
        assert got[name]["schema"] == want[name]["schema"], name
        assert got[name]["rows"] == want[name]["rows"], name
        assert got[name]["sha256"] == want[name]["sha256"], name
    assert got["summary"] == want["summary"]


def test_sample_import_non_null_columns(sample_import: Any) -> None:
    """The columns the schema says are never null stay so (the fingerprint
    holds types only; ``bench/compare_import.py``, in git history, compared
    nullability on the bench's logs): c76dfaf wrote events with ``kind`` and
    ``log_request_id`` non-null and every skipped column nullable."""
    import pyarrow.parquet as pq

    out, _ = sample_import
    required = {
        name: [
            f.name
            for f in pq.read_table(os.path.join(out, name)).schema
            if not f.nullable
        ]
        for name in ("events", "skipped")
    }
    assert required == {"events": ["kind", "log_request_id"], "skipped": []}


def test_sample_import_spark_jobs(sample_import: Any) -> None:
    _, jobs = sample_import
    assert 0 < jobs <= MAX_JOBS, jobs


if __name__ == "__main__":
    print(json.dumps(fingerprint(sys.argv[1]), indent=1, sort_keys=True))
