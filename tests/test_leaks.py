"""Leak checks, each in a fresh interpreter (``tests/isolated/leak_check.py``).

CI size: 200,000 add+cancel and 50,000 add+fire cycles per core, a few
seconds.  RSS and tracemalloc must be flat after warm-up, the callable's and
argument's reference counts unchanged, and a cycle of use must leave nothing
for the cyclic GC.  The figures in docs/reliability.md come from the full run,
``python tests/reliability/leaks.py`` (10,000,000 add+cancel, 1,000,000 add+fire).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.leaks

SCRIPT = pathlib.Path(__file__).resolve().parent / "isolated" / "leak_check.py"


def _run(core: str, *args: str) -> dict:
    env = dict(os.environ)
    if core == "pure":
        env["TICKWHEEL_NO_EXTENSIONS"] = "1"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--core", core, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    assert result.returncode == 0, json.dumps(report, indent=1)
    return report


def test_leaks_flat_memory_refcounts_and_no_gc_cycles(impl):
    core = "pure" if impl.__name__.endswith("_py") else "c"
    # The pure twin is ~15x slower: fewer cycles keep it within seconds.
    counts = ["--cancel", "200000", "--fire", "50000"]
    if core == "pure":
        counts = ["--cancel", "30000", "--fire", "20000"]
    report = _run(core, *counts)
    phases = {r["phase"]: r for r in report["results"]}
    assert phases["gc"]["collected"] == 0 and phases["gc"]["tickwheel_objects"] == []
    assert (
        phases["refs"]["fn_refcount_delta"] == phases["refs"]["arg_refcount_delta"] == 0
    )
    for name in ("cancel", "fire"):
        assert phases[name]["pending_after"] == 0
        assert phases[name]["rss_delta_kb"] <= 1024
        assert phases[name]["tracemalloc_delta_b"] <= 64 * 1024
