"""The replay at scale: a Spark standalone cluster against ``local[*]``, one machine.

Runs ``tickwheel replay TRACE OUT --no-plots`` twice on the same trace (by
default 10,000,000 requests over 256 topic-partitions): on a standalone
cluster of two workers (1 core, 3 GB each; the executors run this venv's
Python) started by :mod:`tickwheel.spark.cluster`, and on ``local[*]``, then
checks that both wrote the same outcomes and prints one Markdown table:

* wall time of the whole command, and of the replay stage (its progress line);
* the executors' CPU and run time, summed over tasks, from Spark's event log
  (``Executor CPU Time``: JVM threads only; ``Executor Run Time``: wall time
  of the tasks, including their Python workers), and the tasks' largest
  ``Peak Execution Memory`` (Spark's own accounting of sort/aggregation
  memory);
* peak resident memory per executor, sampled from ``/proc`` every 0.5 s:
  the executor JVM and the sum of its Python workers, taken at the same
  instant (for ``local[*]`` the driver JVM is the executor);
* CPU seconds of every process of the run (``/proc`` utime + stime, summed
  at each process's last sample): JVMs and Python workers;
* events/s: input events over the replay stage's wall time.

Run: ``python bench/bench_cluster.py [--requests N] [--partitions P]
[--trace DIR] [--keep DIR]``; ``--quick`` is 200,000 requests.  The trace is
generated once into ``--keep`` (default: a temp dir) and reused.  Each setup
runs once: the figures are for a shared 2-core VM, where the two setups
were run back to back, not interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[int, int, float, int] | None:
    """(ppid, pgid, cpu seconds, rss bytes) of a live process, None if gone."""
    from tickwheel.spark.cluster import proc_stat

    fields = proc_stat(pid)
    if fields is None:
        return None
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    return int(fields[1]), int(fields[2]), cpu, int(fields[21]) * PAGE


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Sampler:
    """Samples every process in the given process groups until stopped."""

    def __init__(self, pgids: list[int], period_s: float = 0.5) -> None:
        self.pgids = set(pgids)
        self.period_s = period_s
        self.cpu: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        #: per executor JVM pid: largest (jvm rss + its python workers' rss)
        self.peak: dict[int, tuple[int, int, int]] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sampler:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period_s)

    def sample(self) -> None:
        every: dict[int, tuple[int, int, float, int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _stat(int(entry))
                if st is not None:
                    every[int(entry)] = st
        # The run's processes: those in its process groups and their
        # descendants (pyspark's Python daemon puts itself in a new group).
        procs = {pid: st for pid, st in every.items() if st[1] in self.pgids}
        grown = True
        while grown:
            grown = False
            for pid, st in every.items():
                if pid not in procs and st[0] in procs:
                    procs[pid] = st
                    grown = True
        for pid, (_ppid, _pgid, cpu, _rss) in procs.items():
            self.cpu[pid] = cpu
            # Looked at again each time: a launcher script execs the JVM.
            if self.kind.get(pid) != "executor":
                cmd = _cmd(pid)
                self.kind[pid] = (
                    "executor"
                    if "CoarseGrainedExecutorBackend" in cmd
                    or ("SparkSubmit" in cmd and "java" in cmd)
                    else "jvm"
                    if "java" in cmd
                    else "python"
                )
        # Python workers: descendants of an executor JVM (daemon + forks).
        for pid, st in procs.items():
            if self.kind.get(pid) != "executor":
                continue
            python = 0
            for other, ost in procs.items():
                p, seen = ost[0], 0
                while p in procs and p != pid and seen < 6:
                    p, seen = procs[p][0], seen + 1
                if p == pid and self.kind.get(other) == "python":
                    python += ost[3]
            total = st[3] + python
            if total > sum(self.peak.get(pid, (0, 0, 0))[:2]):
                self.peak[pid] = (st[3], python, total)

    def cpu_by_kind(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, cpu in self.cpu.items():
            kind = "python" if self.kind.get(pid) == "python" else "jvm"
            out[kind] = out.get(kind, 0.0) + cpu
        return out


def _event_file_key(name: str) -> tuple[int, str]:
    match = re.match(r"events_(\d+)_", name)
    return (int(match.group(1)) if match else -1, name)


def _lines(files: list[str]) -> Any:
    for path in files:
        if not os.path.basename(path).startswith("events_") and len(files) > 1:
            continue  # appstatus_* and other markers
        if path.endswith(".zstd"):  # spark.eventLog.compress (Spark's default codec)
            import io

            import zstandard

            with open(path, "rb") as raw:
                reader = zstandard.ZstdDecompressor().stream_reader(raw)
                yield from io.TextIOWrapper(reader, encoding="utf-8")
            continue
        with open(path) as fh:
            yield from fh


def event_log_metrics(log_dir: str) -> dict[str, Any]:
    """Task metrics summed over the application's event log (one app in log_dir)."""
    (name,) = [n for n in os.listdir(log_dir) if not n.startswith(".")]
    path = os.path.join(log_dir, name)
    # Spark 4 may write a rolling log: a directory of events_N_* files.
    files = (
        [os.path.join(path, f) for f in sorted(os.listdir(path), key=_event_file_key)]
        if os.path.isdir(path)
        else [path]
    )
    cpu_ns = run_ms = 0
    peak_exec = 0
    per_exec: dict[str, list[int]] = {}
    failed = 0
    stages: dict[int, dict[str, Any]] = {}
    for line in _lines(files):
        if '"SparkListenerStageCompleted"' in line:
            info = json.loads(line)["Stage Info"]
            stage = stages.setdefault(info["Stage ID"], {"cpu_s": 0.0, "run_s": 0.0})
            stage["name"] = info["Stage Name"].split(" at ")[0]
            stage["tasks"] = info["Number of Tasks"]
            stage["wall_s"] = (
                info.get("Completion Time", 0) - info.get("Submission Time", 0)
            ) / 1e3
            continue
        if '"SparkListenerTaskEnd"' not in line:
            continue
        event = json.loads(line)
        stage = stages.setdefault(event["Stage ID"], {"cpu_s": 0.0, "run_s": 0.0})
        metrics = event.get("Task Metrics") or {}
        stage["cpu_s"] += metrics.get("Executor CPU Time", 0) / 1e9
        stage["run_s"] += metrics.get("Executor Run Time", 0) / 1e3
        info = event.get("Task Info", {})
        if info.get("Failed"):
            failed += 1
        cpu_ns += metrics.get("Executor CPU Time", 0)
        run_ms += metrics.get("Executor Run Time", 0)
        peak_exec = max(peak_exec, metrics.get("Peak Execution Memory", 0))
        ex = per_exec.setdefault(info.get("Executor ID", "?"), [0, 0])
        ex[0] += metrics.get("Executor CPU Time", 0)
        ex[1] += metrics.get("Executor Run Time", 0)
    return {
        "executor_cpu_s": cpu_ns / 1e9,
        "executor_run_s": run_ms / 1e3,
        "peak_execution_memory_mb": peak_exec / 2**20,
        "failed_tasks": failed,
        "stages": {k: stages[k] for k in sorted(stages)},
        "per_executor": {
            k: {"cpu_s": v[0] / 1e9, "run_s": v[1] / 1e3} for k, v in per_exec.items()
        },
    }


def run_replay(
    trace: str, out: str, master: str, events_dir: str, extra_pgids: list[int]
) -> dict[str, Any]:
    env = dict(os.environ)
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    os.makedirs(events_dir, exist_ok=True)
    cmd = [sys.executable, "-m", "tickwheel", "replay", trace, out]
    cmd += ["--master", master, "--no-plots", "--overwrite"]
    cmd += ["--conf", "spark.eventLog.enabled=true"]
    cmd += ["--conf", f"spark.eventLog.dir=file://{events_dir}"]
    cmd += ["--conf", "spark.eventLog.compress=false"]
    cmd += ["--conf", "spark.driver.memory=3g"]
    if master.startswith("spark://"):
        cmd += ["--conf", "spark.executor.memory=2g"]
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    sampler = Sampler([proc.pid, *extra_pgids]).start()
    assert proc.stdout is not None
    output = proc.stdout.read()
    code = proc.wait()
    wall = time.perf_counter() - start
    sampler.stop()
    if code not in (0, 1):
        raise SystemExit(f"replay on {master} failed ({code}):\n{output[-3000:]}")
    stage = re.search(
        r"\[replay 3/6\] done in ([\d.]+) s \(([\d,]+) events, (\d+) engine tasks",
        output,
    )
    assert stage, output
    replay_s = float(stage.group(1))
    events = int(stage.group(2).replace(",", ""))
    metrics = event_log_metrics(events_dir)
    peaks = sorted(sampler.peak.values(), key=lambda t: -t[2])
    return {
        "master": master,
        "wall_s": wall,
        "replay_stage_s": replay_s,
        "events": events,
        "engine_tasks": int(stage.group(3)),
        "events_per_s": events / replay_s,
        "process_cpu_s": sampler.cpu_by_kind(),
        "peak_rss_mb": [
            {"jvm": j / 2**20, "python": p / 2**20, "total": t / 2**20}
            for j, p, t in peaks
        ],
        **metrics,
        "output_tail": output.splitlines()[-3:],
    }


def same_outcomes(a: str, b: str) -> bool:
    import pyarrow.parquet as pq

    ta = pq.read_table(os.path.join(a, "outcomes"))
    tb = pq.read_table(os.path.join(b, "outcomes"))
    key = [(c, "ascending") for c in ta.column_names]
    return bool(ta.sort_by(key).equals(tb.sort_by(key)))


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        "| setup | wall s | replay stage s | events/s | executor CPU s (JVM) "
        "| executor run s | CPU s JVMs / Python | peak RSS per executor MB "
        "(JVM + Python) | peak execution memory MB | failed tasks |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in results:
        peaks = ", ".join(
            f"{p['jvm']:,.0f} + {p['python']:,.0f}" for p in r["peak_rss_mb"]
        )
        cpu = r["process_cpu_s"]
        rows.append(
            f"| {r['master']} | {r['wall_s']:,.1f} | {r['replay_stage_s']:,.1f} | "
            f"{r['events_per_s']:,.0f} | {r['executor_cpu_s']:,.1f} | "
            f"{r['executor_run_s']:,.1f} | {cpu.get('jvm', 0):,.1f} / "
            f"{cpu.get('python', 0):,.1f} | {peaks} | "
            f"{r['peak_execution_memory_mb']:,.0f} | {r['failed_tasks']} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=256)
    parser.add_argument("--trace", default=None, help="an existing trace to use")
    parser.add_argument("--keep", default=None, help="work dir (kept)")
    parser.add_argument("--quick", action="store_true", help="200,000 requests")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument(
        "--only", choices=["cluster", "local"], default=None, help="one setup"
    )
    args = parser.parse_args()
    if args.quick:
        args.requests = 200_000

    from tickwheel.spark.cluster import StandaloneCluster
    from tickwheel.spark.trace import write_trace

    work = args.keep or tempfile.mkdtemp(prefix="tickwheel-bench-cluster-")
    os.makedirs(work, exist_ok=True)
    trace = args.trace or os.path.join(work, f"trace-{args.requests}")
    if not os.path.exists(trace):
        t0 = time.perf_counter()
        table_ = write_trace(trace, args.requests, args.partitions, seed=1)
        print(
            f"trace: {table_.num_rows:,} events in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        del table_
    results = []
    outs = {}
    if args.only in (None, "cluster"):
        cluster = StandaloneCluster(
            os.path.join(work, "cluster"), workers=2, cores=1, memory="3g"
        )
        cluster.die_with_owner = True
        try:
            cluster.start()
            outs["cluster"] = os.path.join(work, "out-cluster")
            results.append(
                run_replay(
                    trace,
                    outs["cluster"],
                    cluster.master_url,
                    os.path.join(work, "events-cluster"),
                    cluster.worker_pgids(),
                )
            )
        finally:
            cluster.stop()
        print(table(results), flush=True)
    if args.only in (None, "local"):
        outs["local"] = os.path.join(work, "out-local")
        shutil.rmtree(os.path.join(work, "events-local"), ignore_errors=True)
        results.append(
            run_replay(
                trace, outs["local"], "local[*]", os.path.join(work, "events-local"), []
            )
        )
    print(table(results))
    if len(outs) == 2:
        print("same outcomes:", same_outcomes(outs["cluster"], outs["local"]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
