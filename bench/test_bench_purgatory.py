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


def test_ab_purgatory_table(tmp_path, capsys):
    # Two "trees" that are the same checkout: the table has every row for
    # both, with a ratio, and the raw runs are written.
    import importlib.util
    import json
    import os

    import ab_purgatory

    import tickwheel

    # The directory holding the tickwheel this run imports (src/ of an
    # in-place build, or site-packages): a tree as the script takes it.
    src = os.path.dirname(os.path.dirname(os.path.abspath(tickwheel.__file__)))
    if not tickwheel.USE_EXTENSIONS:
        pytest.skip("the A/B drives compiled trees (it asserts USE_EXTENSIONS)")
    out = tmp_path / "ab.json"
    assert ab_purgatory.main([
        "--tree", f"a={src}", "--tree", f"b={src}", "--pairs", "1",
        "--saturated-seconds", "0.002", "--paced-seconds", "0.05",
        "--engine-requests", "500", "--json", str(out),
    ]) == 0  # fmt: skip
    table = capsys.readouterr().out
    rows = [
        line
        for line in table.splitlines()
        if line.startswith(("| tickwheel", "| engine"))
    ]
    assert len(rows) == 7
    assert all(line.count("×") == 1 for line in rows[:-1]), table
    # The engine row needs the spark extra (numpy, pyarrow).
    spark_extra = all(importlib.util.find_spec(m) for m in ("numpy", "pyarrow"))
    assert rows[-1].count("×") == (1 if spark_extra else 0), table
    runs = json.loads(out.read_text())["runs"]
    assert {r["tree"] for r in runs} == {"a", "b"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tree", "x"], "--tree must be NAME=SRC, got 'x'"),
        (["--tree", "a=/nonexistent"], "no tickwheel package in '/nonexistent'"),
        (["--tree", "a=src"], "give two --tree options, got 1"),
        (["--tree", "a=src", "--tree", "b=src", "--pairs", "0"], "--pairs must be"),
        (
            ["--tree", "a=src", "--tree", "b=src", "--paced-seconds", "0"],
            "--paced-seconds must be > 0",
        ),
    ],
)
def test_ab_purgatory_refuses_bad_arguments(argv, message, capsys, monkeypatch):
    import os

    import ab_purgatory

    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with pytest.raises(SystemExit) as exc:
        ab_purgatory.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
