"""``tickwheel replay`` on a real Spark standalone cluster, as a user runs it.

A master and two workers (1 core, 2 GB each) on 127.0.0.1, started by
:mod:`tickwheel.spark.cluster` with pyspark's own launcher, then:

* the replay with ``--master spark://...`` writes outcomes, purgatory sizes
  and rejected rows identical, row for row, to ``--master local[2]`` on the
  same trace, and every executor that ran the engine logged that it runs
  accelerated (its own stderr in the worker's work dir);
* the same while one executor JVM is killed (SIGKILL, by pid) as soon as its
  engine has started: Spark replaces it and retries the lost tasks, and the
  outputs are still identical (the engine is deterministic per partition),
  with exit code 0.  This run ships the compiled core the way the docs tell
  users to: a virtual environment packed with ``venv-pack`` and sent with
  ``spark.archives`` (``PYSPARK_PYTHON=./environment/bin/python``);
* a cluster whose owner is SIGKILLed leaves no JVM behind, and the fixture's
  own stop leaves none (checked by pid).

Compiled core only (marked ``c_extension``: the pure-Python run deselects
them); about 4 minutes on 2 cores.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tickwheel.spark.cluster import (
    ACCELERATED,
    StandaloneCluster,
    engine_reports,
    group_pids,
)
from tickwheel.spark.trace import write_trace

pytestmark = [pytest.mark.cluster, pytest.mark.c_extension]

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ("outcomes", "purgatory_size", "rejected")


def replay_cmd(trace: Path, out: Path, master: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tickwheel",
        "replay",
        str(trace),
        str(out),
        "--master",
        master,
        "--no-plots",
        *extra,
    ]


def cluster_env(**extra: str) -> dict[str, str]:
    """The driver's environment: executors run this venv's Python, on 127.0.0.1."""
    env = dict(os.environ)
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    env.update(extra)
    return env


def run(cmd: list[str], env: dict[str, str], expect: int = 0) -> str:
    """Run ``cmd``; assert its exit code; return its stdout.

    The replays here exit 1: the trace holds malformed rows on purpose (so
    ``rejected/`` is compared too).
    """
    done = subprocess.run(
        cmd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == expect, (
        done.returncode,
        done.stdout,
        done.stderr[-3000:],
    )
    return done.stdout


def read_sorted(out: Path, name: str) -> Any:
    table = pq.read_table(out / name)
    return table.sort_by([(c, "ascending") for c in table.column_names])


def assert_same_outputs(out: Path, reference: Path) -> None:
    """Every dataset holds the same rows (sorted by all columns) as the reference."""
    for name in DATASETS:
        got, want = read_sorted(out, name), read_sorted(reference, name)
        assert got.schema == want.schema, name
        assert got.num_rows == want.num_rows, (name, got.num_rows, want.num_rows)
        assert got.equals(want), f"{name}: rows differ from local[2]"


def new_apps(cluster: StandaloneCluster, before: set[str]) -> set[str]:
    apps = set()
    for i in range(cluster.workers):
        work = cluster.work_dir(i)
        if os.path.isdir(work):
            apps.update(a for a in os.listdir(work) if a.startswith("app-"))
    return apps - before


def assert_accelerated(cluster: StandaloneCluster, app: str, least: int) -> dict:
    """Every executor of ``app`` that ran the engine logged ACCELERATED, once."""
    reports = engine_reports([cluster.work_dir(i) for i in range(cluster.workers)], app)
    assert len(reports) >= least, reports
    slow = {k: v for k, v in reports.items() if v != ACCELERATED}
    assert not slow, f"executors not running accelerated: {slow}"
    return reports


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cluster-trace") / "events"
    write_trace(path, 100_000, 16, seed=7, malformed=25)
    return path


@pytest.fixture(scope="module")
def local_out(trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: the same replay on local[2]."""
    out = tmp_path_factory.mktemp("local") / "out"
    stdout = run(replay_cmd(trace, out, "local[2]"), cluster_env(), expect=1)
    assert "engine accelerated" in stdout
    return out


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two workers; stopped by pgid at the end, on SIGTERM and atexit."""
    base = tmp_path_factory.mktemp("standalone")
    cluster = StandaloneCluster(str(base), workers=2, cores=1, memory="2g")
    cluster.die_with_owner = True  # a SIGKILLed pytest takes them along
    atexit.register(cluster.stop)
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        cluster.stop()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        cluster.start()
        yield cluster
    finally:
        left = cluster.stop()
        signal.signal(signal.SIGTERM, previous)
        atexit.unregister(cluster.stop)
    groups = [d.pid for d in cluster.daemons]
    assert len(groups) >= 3  # master, 2 workers (+ the Connect server)
    assert not left and not group_pids(groups), f"processes left: {left}"


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs' recipe: a venv with tickwheel and its engine's needs, venv-packed.

    tickwheel is installed from a wheel built from this checkout (so the
    archive holds the code under test, compiled), or from the wheel that
    ``TICKWHEEL_TEST_WHEEL`` names (CI's own build of this checkout, so the
    core is not compiled twice); a .tar.gz (Spark 4.3 unpacks a plain .tar
    without the files' exec bits), lightly compressed.  The venv's base
    interpreter must be at the same path on the executors (here: the same
    machine), as venv-pack requires.
    """
    base = tmp_path_factory.mktemp("packed")
    py = sys.executable
    pip = [py, "-m", "pip", "--disable-pip-version-check", "-q"]
    given = os.environ.get("TICKWHEEL_TEST_WHEEL")
    if given:
        wheel = Path(given)
        ok = wheel.is_file() and wheel.suffix == ".whl"
        assert ok, f"TICKWHEEL_TEST_WHEEL={given} is not a wheel file"
    else:
        run(
            [*pip, "wheel", "--no-deps", "-w", str(base / "dist"), str(ROOT)],
            {**os.environ},
        )
        (wheel,) = (base / "dist").glob("tickwheel-*.whl")
    env_dir = base / "env"
    # --copies: Spark refuses to unpack a symlink that points outside the
    # archive, and a plain venv's bin/python is one.
    run([py, "-m", "venv", "--copies", str(env_dir)], {**os.environ})
    env_pip = [str(env_dir / "bin" / "python"), "-m", "pip", "-q"]
    run(
        [*env_pip, "install", str(wheel), "pyarrow>=16", "numpy>=1.24", "pandas>=2,<3"]
        + ["venv-pack"],
        {**os.environ},
    )
    archive = base / "env.tar.gz"
    run(
        [str(env_dir / "bin" / "venv-pack"), "-q", "-p", str(env_dir)]
        + ["--compress-level", "1", "-o", str(archive)],
        {**os.environ},
    )
    return archive


def test_cluster_replay_matches_local(
    standalone: StandaloneCluster, trace: Path, local_out: Path, tmp_path: Path
) -> None:
    before = new_apps(standalone, set())
    out = tmp_path / "out"
    cmd = replay_cmd(trace, out, standalone.master_url)
    assert "engine accelerated" in run(cmd, cluster_env(), expect=1)
    assert_same_outputs(out, local_out)
    (app,) = new_apps(standalone, before)
    assert_accelerated(standalone, app, least=2)


class _Lines:
    """A subprocess's stdout lines, read by a thread, each with its arrival time."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        assert proc.stdout is not None
        self.thread = threading.Thread(target=self._read, args=(proc.stdout,))
        self.thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), line))

    def when(self, text: str) -> float | None:
        return next((t for t, line in self.lines if text in line), None)

    def text(self) -> str:
        self.thread.join(timeout=30)
        return "".join(line for _, line in self.lines)


def test_cluster_worker_lost_mid_job(
    standalone: StandaloneCluster,
    trace: Path,
    local_out: Path,
    packed_env: Path,
    tmp_path: Path,
) -> None:
    """SIGKILL an executor once its engine runs: same outputs, exit code as local."""
    before = new_apps(standalone, set())
    out = tmp_path / "out"
    log = tmp_path / "driver.log"
    cmd = replay_cmd(
        trace,
        out,
        standalone.master_url,
        "--verbose",  # Spark's own log, to find the lost executor in it
        "--conf",
        f"spark.archives={packed_env}#environment",
    )
    env = cluster_env(PYSPARK_PYTHON="./environment/bin/python")
    with open(log, "w") as err:
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        lines = _Lines(proc)
        killed: tuple[int, str] | None = None
        try:
            deadline = time.monotonic() + 600
            while killed is None and proc.poll() is None:
                assert time.monotonic() < deadline, "the replay did not start"
                apps = new_apps(standalone, before)
                works = [standalone.work_dir(i) for i in range(standalone.workers)]
                started = [k for a in apps for k in engine_reports(works, a)]
                if started:
                    executor = started[0].rpartition("/")[2]
                    pids = [
                        p for p, e in standalone.executors().items() if e == executor
                    ]
                    assert len(pids) == 1, (executor, standalone.executors())
                    os.kill(pids[0], signal.SIGKILL)
                    killed = (pids[0], executor)
                    killed_at = time.monotonic()
                time.sleep(0.05)
            code = proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    stdout = lines.text()
    assert proc.stdout is not None
    proc.stdout.close()
    assert killed is not None, f"the replay ended before an engine started:\n{stdout}"
    assert code == 1, (code, stdout, log.read_text()[-3000:])  # as local: rejected rows
    replayed = lines.when("[replay 3/5] done")  # --no-plots: five stages
    assert replayed is not None and replayed > killed_at, (
        f"killed after the replay:\n{stdout}"
    )
    spark_log = log.read_text()
    assert f"Lost executor {killed[1]}" in spark_log, spark_log[-3000:]
    assert_same_outputs(out, local_out)
    (app,) = new_apps(standalone, before)
    # The killed executor logged before it died; its replacement logs too.
    reports = assert_accelerated(standalone, app, least=2)
    assert f"{app}/{killed[1]}" in reports
    assert "engine accelerated" in stdout


_OWNER = """
import sys, time
from tickwheel.spark.cluster import StandaloneCluster
cluster = StandaloneCluster(sys.argv[1], workers=1, die_with_owner=True).start()
print(" ".join(str(d.pid) for d in cluster.daemons), flush=True)
time.sleep(600)
"""


def test_cluster_owner_killed_leaves_no_jvm(tmp_path: Path) -> None:
    """SIGKILL the process that started a cluster: its JVMs go too (by pgid)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    with proc.stdout:
        groups = [int(p) for p in proc.stdout.readline().split()]
    try:
        assert len(groups) == 2, groups
        assert all(group_pids([g]) for g in groups)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 60
        while group_pids(groups) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not group_pids(groups), group_pids(groups)
    finally:
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_engine_reports_flag_pure_python(tmp_path: Path) -> None:
    """The check reads each executor's stderr and tells a fallback apart."""
    app = tmp_path / "app-1"
    lines = {
        "0": f"x\ntickwheel 0.1.0 replay engine on pid 11: {ACCELERATED}\n",
        "1": "tickwheel 0.1.0 replay engine on pid 12: pure Python (compiled core "
        "not in use: TICKWHEEL_NO_EXTENSIONS or no wheel for this platform)\n",
        "2": "no engine ran here\n",
    }
    for executor, text in lines.items():
        (app / executor).mkdir(parents=True)
        (app / executor / "stderr").write_text(text)
    reports = engine_reports([str(tmp_path)])
    assert reports["app-1/0"] == ACCELERATED
    assert reports["app-1/1"].startswith("pure Python")
    assert "app-1/2" not in reports
    cluster = StandaloneCluster(str(tmp_path), workers=1)
    cluster.work_dir = lambda i: str(tmp_path)  # type: ignore[method-assign]
    with pytest.raises(AssertionError, match="not running accelerated"):
        assert_accelerated(cluster, "app-1", least=1)


@pytest.fixture(scope="module")
def connect_url(standalone: StandaloneCluster) -> str:
    """A Spark Connect server on the standalone cluster (stopped with it)."""
    return standalone.start_connect(python=sys.executable)


def test_connect_replay_matches_local(
    standalone: StandaloneCluster,
    connect_url: str,
    trace: Path,
    local_out: Path,
    tmp_path: Path,
) -> None:
    """``--remote sc://...``: the same outputs as local[2], engine accelerated."""
    before = new_apps(standalone, set())
    out = tmp_path / "out"
    cmd = replay_cmd(trace, out, "unused", "--remote", connect_url)
    cmd.remove("--master")
    cmd.remove("unused")
    stdout = run(cmd, cluster_env(), expect=1)
    assert f"starting Spark ({connect_url})" in stdout
    assert "engine accelerated" in stdout
    assert_same_outputs(out, local_out)
    assert not new_apps(standalone, before)  # the server's own application ran it


_RESOLVE = """
import sys
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
import tickwheel.spark
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
events = spark.read.parquet(sys.argv[2])
assert type(events).__module__.startswith("pyspark.sql.connect"), type(events)
got = tickwheel.spark.resolve(events).toArrow()
want = pq.read_table(sys.argv[3])
key = [(c, "ascending") for c in want.column_names]
assert got.select(want.column_names).sort_by(key).equals(want.sort_by(key))
print("rows", got.num_rows)
spark.stop()
"""


def test_connect_resolve_accepts_connect_dataframe(
    connect_url: str, trace: Path, local_out: Path
) -> None:
    """``tickwheel.spark.resolve`` on a Connect DataFrame: local[2]'s outcomes."""
    stdout = run(
        [sys.executable, "-c", _RESOLVE, connect_url, str(trace)]
        + [str(local_out / "outcomes")],
        cluster_env(),
    )
    rows = pq.read_table(local_out / "outcomes").num_rows
    assert f"rows {rows}" in stdout
