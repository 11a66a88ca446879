"""bench_server.py's smoke mode (``--quick``): every workload on every loop.

The numbers of a quick run mean nothing; what is asserted is what must hold
on any machine: every run finished, every timer the servers scheduled fired
or was cancelled, none ran before its deadline, none is left pending.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "bench_server.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_quick_ws_and_idle(tmp_path):
    out = tmp_path / "server.json"
    proc = run("--quick", "--workloads", "ws,idle", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    # The clients abort their connections at the end of a round: the
    # servers take that quietly.
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    summary = data["summary"]
    conns = data["configs"]["idle"]["idle_conns"]
    # Four loops for ws; for idle, postpone() on the two tickwheel loops too,
    # and the floor (no timer) on the two base loops.
    assert sorted(k for k in summary if k.startswith("ws/")) == [
        "ws/asyncio/cancel", "ws/tickwheel-uvloop/cancel",
        "ws/tickwheel/cancel", "ws/uvloop/cancel",
    ]  # fmt: skip
    idle = {k: v for k, v in summary.items() if k.startswith("idle/")}
    assert len(idle) == 8
    for key, row in idle.items():
        if key.endswith("/none"):  # the floor: no timer
            assert row["timers"]["scheduled"] == 0, key
            continue
        t = row["timers"]
        # Each connection's idle timeout fired once the clients went quiet.
        assert t["fired"] == conns, key
        assert t["lost"] == 0 and t["early"] == 0, key
        assert t.get("pending", 0) == 0, key
        assert row["cpu_per_msg_s"] > 0, key
        if key.endswith("/postpone"):
            assert t["scheduled"] == conns and t["moved"] > conns, key
    for run_ in data["runs"]["ws/asyncio/cancel"]:
        assert run_["connections"] == data["configs"]["ws"]["ws_conns"]
        assert run_["echoes"] > 0
    assert out.with_suffix(".md").read_text().count("| 3: the same with") == 1
    assert out.with_suffix(".png").stat().st_size > 0


def test_quick_http(tmp_path):
    out = tmp_path / "server.json"
    proc = run("--quick", "--workloads", "http", "--out", str(out))
    if shutil.which("wrk") is None:
        # Without wrk: one clear line saying how to install it, exit 2.
        assert proc.returncode == 2
        assert proc.stderr.count("\n") == 1 and "apt-get install -y wrk" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())["summary"]
    assert len(summary) == 4
    for key, row in summary.items():
        t = row["timers"]
        assert row["rps"] > 0 and row["p99_s"] >= row["p50_s"] > 0, key
        # One asyncio.timeout per request, left before its deadline.
        assert t["scheduled"] > 0 and t["cancelled"] == t["scheduled"], key
        assert t["lost"] == 0 and t.get("pending", 0) == 0, key


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--loops", "trio"], "--loops: unknown 'trio'"),
        (["--workloads", "grpc"], "--workloads: unknown 'grpc'"),
        (["--rounds", "0"], "--rounds must be >= 1, got 0"),
    ],
)
def test_bad_arguments(args, named):
    proc = run(*args)
    assert proc.returncode == 2
    assert named in proc.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["grpc"], "workload: unknown 'grpc'"),
        (["--loops", "trio", "idle"], "--loops: unknown 'trio'"),
        (["--m", "0"], "--m must be >= 1, got 0"),
        (["--conns", "20000", "idle"], "--conns must be in 1..15000"),
        (["--keep", __file__, "idle"], "is not a directory"),
    ],
)
def test_callgrind_server_bad_arguments(args, named):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT.with_name("callgrind_server.py")), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr and "Traceback" not in proc.stderr


def test_bad_files_are_refused_before_anything_is_measured(tmp_path):
    """--render and --out name what is wrong in one line, exit 2, no traceback;
    a non-JSON --out is left as it was (a measurement would overwrite it)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    cases = [
        (["--render", str(tmp_path / "missing.json")], "--render: "),
        (["--render", str(other)], "no 'runs'"),
        (["--out", str(tmp_path / "no" / "r.json")], "does not exist"),
        (["--out", str(notes), "--workloads", "idle"], "not a results JSON"),
    ]
    for args, named in cases:
        proc = run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert named in proc.stderr and "Traceback" not in proc.stderr, args
    assert notes.read_text() == "mine"


def test_a_run_of_some_workloads_keeps_the_others_runs(tmp_path):
    """--out on an earlier results file: the workloads run now replace theirs,
    the others' rounds stay as they were (read once, before measuring)."""
    earlier = SCRIPT.parent / "results" / "server-x86_64-py3.11.7.json"
    out = tmp_path / "server.json"
    out.write_text(earlier.read_text())
    proc = run(
        "--quick", "--workloads", "idle", "--loops", "asyncio", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    before, after = json.loads(earlier.read_text()), json.loads(out.read_text())
    for key, rounds in before["runs"].items():
        if not key.startswith("idle/"):
            assert after["runs"][key] == rounds, key
    assert sorted(k for k in after["runs"] if k.startswith("idle/")) == [
        "idle/asyncio/cancel",
        "idle/asyncio/none",
    ]
    assert "--workloads idle" in after["commands"]["idle"]
    assert after["commands"]["http"] == before["commands"]["http"]


def test_perf_shares_group_the_report_by_where_the_cpu_went():
    sys.path.insert(0, str(SCRIPT.parent))
    from bench_server import perf_shares, perf_table

    report = (
        "# Overhead  Shared Object\n"
        "    69.41%  [kernel.kallsyms]\n"
        "    27.01%  libpython3.11.so.1.0\n"
        "     2.50%  libc.so.6\n"
        "     0.72%  _wheel.cpython-311-x86_64-linux-gnu.so\n"
        "     0.36%  _socket.cpython-311-x86_64-linux-gnu.so\n"
    )
    shares = perf_shares(report)
    assert shares == pytest.approx(
        {"kernel_pct": 69.41, "python_pct": 27.01, "tickwheel_pct": 0.72,
         "other_pct": 2.86}
    )  # fmt: skip
    runs = {"idle/tickwheel/cancel": [{"perf": shares}, {}]}
    text = "\n".join(perf_table(runs))
    assert "| idle/tickwheel/cancel | 69.4 % | 27.0 % | 0.7 % | 2.9 % |" in text
    assert perf_table({"idle/asyncio/none": [{}]}) == []


def test_perf_without_perf_installed_says_so(tmp_path):
    # A PATH with the interpreter's directory only: no perf on it.
    env = {"PATH": str(Path(sys.executable).parent)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--perf", "--workloads", "idle"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--perf needs perf" in proc.stderr
