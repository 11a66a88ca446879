"""A Spark standalone cluster on this machine: a master, workers, Spark Connect.

Why: ``tickwheel replay --master spark://...`` must give the answers of
``local[*]`` on a real cluster, with executors that are separate JVMs with
their own Python workers, that can be lost mid-job and replaced.  This module
starts such a cluster with pyspark's own launcher (no Spark download), for
the tests and for users who want to try the cluster path before they have a
cluster::

    python -m tickwheel.spark.cluster start --dir twc/     # prints the master URL
    PYSPARK_PYTHON="$(command -v python)" tickwheel replay --demo out/ \\
        --master "$(python -m tickwheel.spark.cluster url --dir twc/)"
    python -m tickwheel.spark.cluster stop --dir twc/

What runs: ``bin/spark-class org.apache.spark.deploy.master.Master`` and one
``...deploy.worker.Worker spark://127.0.0.1:PORT`` per worker, each with its
own cores, memory and work directory (executor logs are in
``WORK_DIR/<app-id>/<executor-id>/stderr``), all bound to 127.0.0.1 on
random free ports; with ``--connect`` also a Spark Connect server
(``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``)
running on that cluster.  ``start`` returns once every worker is registered
with the master (its ``/json`` page) and the Connect port answers.

No stray JVMs: every daemon is started in its own process group
(``start_new_session``), so its executor JVMs share its group (their Python
daemons move to groups of their own but stay their children), and
:meth:`StandaloneCluster.stop` signals each group (SIGTERM, then SIGKILL
after a grace period, descendants included) and waits until none of those
processes is left.  Used as a context manager, or from a process that
registers :meth:`~StandaloneCluster.stop` with ``atexit`` and on SIGTERM (the
pytest fixture does; with ``die_with_owner`` even a SIGKILLed owner takes the
daemons along), a killed run leaves nothing behind.  ``start --dir`` writes
the daemons' pids and start times to ``DIR/cluster.json``, which ``stop
--dir`` reads (a pid that now belongs to another process is left alone).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "ACCELERATED",
    "Daemon",
    "StandaloneCluster",
    "engine_reports",
    "executor_pids",
    "family_pids",
    "free_port",
    "group_pids",
    "proc_stat",
    "spark_home",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
HOST = "127.0.0.1"


def spark_home() -> str:
    """The Spark installation that pyspark ships (its ``bin/``, ``jars/``)."""
    home = os.environ.get("SPARK_HOME")
    if home and os.path.isfile(os.path.join(home, "bin", "spark-class")):
        return home
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def free_port(host: str = HOST, tries: int = 50) -> int:
    """A random free TCP port in 20000-59999 on ``host`` (checked by binding it)."""
    for _ in range(tries):
        port = random.randint(20_000, 59_999)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port found on {host} after {tries} tries")


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name; None if gone.

    Index 0 is the state (field 3 of proc(5)), 1 the ppid, 2 the pgid, 11/12
    utime/stime, 19 the start time, 21 the RSS in pages.  A zombie (state
    ``Z``/``X``: exited, not yet reaped) counts as gone.
    """
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields


def _live() -> dict[int, list[str]]:
    """Every live process: {pid: its stat fields}."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = proc_stat(int(entry))
            if fields is not None:
                found[int(entry)] = fields
    return found


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc), None if gone."""
    fields = proc_stat(pid)
    return None if fields is None else int(fields[19])


def _pgid_of(pid: int) -> int | None:
    fields = proc_stat(pid)
    return None if fields is None else int(fields[2])


def group_pids(pgids: Sequence[int]) -> list[int]:
    """Live processes (not zombies) whose process group is one of ``pgids``."""
    wanted = set(pgids)
    return sorted(pid for pid, f in _live().items() if int(f[2]) in wanted)


def family_pids(pgids: Sequence[int]) -> dict[int, int | None]:
    """Processes of the given groups and all their descendants: {pid: start time}.

    Descendants matter: pyspark's Python daemon moves itself to a process
    group of its own (``os.setpgid(0, 0)``), so an executor's Python workers
    are outside its worker's group, though still its children.
    """
    every = _live()
    wanted = set(pgids)
    found = {pid for pid, f in every.items() if int(f[2]) in wanted}
    grown = True
    while grown:
        before = len(found)
        found.update(pid for pid, f in every.items() if int(f[1]) in found)
        grown = len(found) > before
    return {pid: int(every[pid][19]) for pid in sorted(found)}


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def executor_pids(pgids: Sequence[int]) -> dict[int, str]:
    """Executor JVMs in the given process groups: {pid: executor id}."""
    out = {}
    for pid in group_pids(pgids):
        args = _cmdline(pid)
        if EXECUTOR_CLASS in args:
            i = args.index("--executor-id") if "--executor-id" in args else -1
            out[pid] = args[i + 1] if 0 <= i < len(args) - 1 else "?"
    return out


#: What the engine logs once per executor (see ``engine._log_accelerated_once``).
ENGINE_LINE = re.compile(r"tickwheel \S+ replay engine on pid \d+: (.*)$")
ACCELERATED = "accelerated (compiled core, purgatory and event loop)"


def engine_reports(
    work_dirs: Sequence[str], app_id: str | None = None
) -> dict[str, str]:
    """Each executor's engine line: {"<app>/<executor>": what follows the pid}.

    Reads ``WORK_DIR/<app-id>/<executor-id>/stderr`` of every worker (of
    ``app_id`` only, if given).  An executor that ran no replay task has no
    line and is not listed; one that logged twice is listed with both
    answers joined by " | " (it should not happen: one line per executor).
    """
    found: dict[str, str] = {}
    for work in work_dirs:
        for app in sorted(os.listdir(work)) if os.path.isdir(work) else []:
            if app_id is not None and app != app_id:
                continue
            app_dir = os.path.join(work, app)
            if not os.path.isdir(app_dir):
                continue
            for executor in sorted(os.listdir(app_dir)):
                path = os.path.join(app_dir, executor, "stderr")
                if not os.path.isfile(path):
                    continue
                with open(path, errors="replace") as fh:
                    lines = [m.group(1) for m in map(ENGINE_LINE.search, fh) if m]
                if lines:
                    found[f"{app}/{executor}"] = " | ".join(x.strip() for x in lines)
    return found


@dataclass
class Daemon:
    """One daemon this module started: its pid is also its process group id."""

    name: str
    pid: int
    start_time: int | None
    log: str
    port: int = 0
    ui_port: int = 0

    def alive(self) -> bool:
        """Still running, and still the process that was started (not a reused pid)."""
        now = _start_time(self.pid)
        return (
            now is not None
            and now == self.start_time
            and _pgid_of(self.pid) == (self.pid)
        )


def _wait(what: str, check: Any, timeout_s: float, log: str | None = None) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = ""
            if log and os.path.exists(log):
                with open(log, errors="replace") as fh:
                    tail = "".join(fh.readlines()[-15:])
            raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s\n{tail}")
        time.sleep(0.25)


def _port_open(port: int, host: str = HOST) -> bool:
    try:
        socket.create_connection((host, port), timeout=0.5).close()
    except OSError:
        return False
    return True


@dataclass
class StandaloneCluster:
    """A standalone master and ``workers`` workers on 127.0.0.1 (see the module doc).

    :param base_dir: holds the daemons' logs, the workers' work directories
        and ``cluster.json``
    :param workers: number of workers
    :param cores: cores each worker offers (``--cores``)
    :param memory: memory each worker offers its executors (``--memory``)
    :param daemon_memory: heap of each daemon JVM (``SPARK_DAEMON_MEMORY``)
    :param die_with_owner: the daemons get SIGKILL when the thread that
        started them exits, even by SIGKILL (Linux ``PR_SET_PDEATHSIG``; their
        executors then exit on losing their worker).  For tests; the ``start``
        command leaves the cluster running.
    """

    base_dir: str
    workers: int = 2
    cores: int = 1
    memory: str = "2g"
    daemon_memory: str = "512m"
    die_with_owner: bool = False
    daemons: list[Daemon] = field(default_factory=list)
    #: The Popen objects of the daemons started here (reaped by stop()).
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def master(self) -> Daemon:
        return next(d for d in self.daemons if d.name == "master")

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``."""
        return f"spark://{HOST}:{self.master.port}"

    @property
    def connect_url(self) -> str | None:
        """``sc://127.0.0.1:PORT`` if a Connect server was started."""
        for d in self.daemons:
            if d.name == "connect":
                return f"sc://{HOST}:{d.port}"
        return None

    def work_dir(self, index: int) -> str:
        """Worker ``index``'s work dir (executor logs: ``<app>/<exec>/stderr``)."""
        return os.path.join(self.base_dir, f"worker-{index}")

    def worker_pgids(self) -> list[int]:
        return [d.pid for d in self.daemons if d.name.startswith("worker")]

    def executors(self) -> dict[int, str]:
        """Running executor JVMs of this cluster's workers: {pid: executor id}."""
        return executor_pids(self.worker_pgids())

    def _env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=spark_home(),
            SPARK_LOCAL_IP=HOST,
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            # Standalone daemons read spark-defaults from here; keep a
            # user's own conf dir out of the picture.
            SPARK_CONF_DIR=os.path.join(self.base_dir, "conf"),
        )
        env.update(extra)
        return env

    def _spawn(
        self, name: str, args: list[str], env: dict[str, str], port: int, ui: int = 0
    ) -> Daemon:
        log = os.path.join(self.base_dir, f"{name}.log")
        with open(log, "ab") as fh:
            proc = subprocess.Popen(
                args,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # its own process group: killed as one
                preexec_fn=_die_with_parent if self.die_with_owner else None,
            )
        self._procs.append(proc)
        daemon = Daemon(name, proc.pid, _start_time(proc.pid), log, port, ui)
        self.daemons.append(daemon)
        self._save()
        return daemon

    def _save(self) -> None:
        state = {
            "master_url": self.master_url if self.daemons else None,
            "connect_url": self.connect_url,
            "daemons": [asdict(d) for d in self.daemons],
        }
        path = os.path.join(self.base_dir, "cluster.json")
        with open(path + ".tmp", "w") as fh:
            json.dump(state, fh, indent=2)
        os.replace(path + ".tmp", path)

    def master_state(self) -> dict[str, Any]:
        """The master's ``/json`` page (workers, applications)."""
        url = f"http://{HOST}:{self.master.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as resp:
            state: dict[str, Any] = json.load(resp)
        return state

    def _alive_workers(self) -> int:
        try:
            state = self.master_state()
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def start(self, timeout_s: float = 120) -> StandaloneCluster:
        """Start the master and the workers; return once all workers are registered."""
        os.makedirs(os.path.join(self.base_dir, "conf"), exist_ok=True)
        spark_class = os.path.join(spark_home(), "bin", "spark-class")
        port, ui = free_port(), free_port()
        try:
            master = self._spawn(
                "master",
                [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(port)]
                + ["--webui-port", str(ui)],
                self._env(),
                port,
                ui,
            )
            _wait("the Spark master", lambda: _port_open(port), timeout_s, master.log)
            for i in range(self.workers):
                work = self.work_dir(i)
                tmp = os.path.join(work, "tmp")
                os.makedirs(tmp, exist_ok=True)
                wport, wui = free_port(), free_port()
                self._spawn(
                    f"worker-{i}",
                    [spark_class, WORKER_CLASS, "--host", HOST, "--port", str(wport)]
                    + ["--webui-port", str(wui), "--cores", str(self.cores)]
                    + ["--memory", self.memory, "--work-dir", work, self.master_url],
                    # Each worker's executors and Python workers get their own
                    # temp dir (the engine's once-per-executor log marker).
                    self._env(TMPDIR=tmp),
                    wport,
                    wui,
                )
            _wait(
                f"{self.workers} registered workers",
                lambda: self._alive_workers() >= self.workers,
                timeout_s,
                master.log,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def start_connect(
        self, python: str | None = None, timeout_s: float = 180, **conf: str
    ) -> str:
        """Start a Spark Connect server on this cluster; return ``sc://HOST:PORT``.

        :param python: the executors' Python (``spark.pyspark.python``;
            default: this interpreter)
        :param conf: further ``--conf`` settings for the server's application
        """
        port = free_port()
        settings = {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(port),
            "spark.pyspark.python": python or sys.executable,
            "spark.ui.enabled": "false",
            "spark.driver.memory": "1g",
            **conf,
        }
        args = [
            os.path.join(spark_home(), "bin", "spark-submit"),
            "--class",
            CONNECT_CLASS,
            "--master",
            self.master_url,
            "--name",
            "tickwheel-connect",
        ]
        for key, value in settings.items():
            args += ["--conf", f"{key}={value}"]
        args.append("spark-internal")
        # The server's Python UDFs run ``PYSPARK_PYTHON`` (the conf alone is
        # not enough for Connect's planner).
        env = self._env(PYSPARK_PYTHON=settings["spark.pyspark.python"])
        daemon = self._spawn("connect", args, env, port)
        try:
            _wait(
                "the Spark Connect server",
                lambda: _port_open(port) or not daemon.alive(),
                timeout_s,
                daemon.log,
            )
            if not daemon.alive():
                raise RuntimeError(
                    f"the Spark Connect server exited; see its log {daemon.log}"
                )
        except BaseException:
            self.stop()
            raise
        return f"sc://{HOST}:{port}"

    def stop(self, grace_s: float = 15) -> list[int]:
        """Stop every daemon's process group; return the pids still alive (none).

        SIGTERM to each group first (the master and workers shut down their
        executors), SIGKILL to whatever is left after ``grace_s``, the
        groups' descendants included (:func:`family_pids`).
        """
        # A pid is never handed out while a process group of that id has
        # members, so a group with members is still one of ours.
        groups = [d.pid for d in self.daemons if group_pids([d.pid])]
        family = family_pids(groups)  # with the Python workers (own groups)

        def alive() -> list[int]:
            return [p for p, t in family.items() if t and _start_time(p) == t]

        for pgid in reversed(groups):  # Connect and workers before the master
            _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        for pgid in groups:
            _signal_group(pgid, signal.SIGKILL)
        for pid in alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = sorted(set(alive()) | set(group_pids(groups)))
        for proc in self._procs:
            if proc.poll() is None and proc.pid not in left:
                proc.wait(timeout=5)
        if os.path.isdir(self.base_dir):
            self._save()
        return left

    def __enter__(self) -> StandaloneCluster:
        return self.start() if not self.daemons else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @classmethod
    def load(cls, base_dir: str) -> StandaloneCluster:
        """The cluster that ``start --dir base_dir`` left running."""
        with open(os.path.join(base_dir, "cluster.json")) as fh:
            state = json.load(fh)
        daemons = [Daemon(**d) for d in state["daemons"]]
        workers = sum(1 for d in daemons if d.name.startswith("worker"))
        return cls(base_dir, workers=workers, daemons=daemons)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent thread exits (Linux)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG; kept across exec


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tickwheel.spark.cluster start|stop|status|url --dir DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m tickwheel.spark.cluster",
        description="Start or stop a Spark standalone cluster (a master and "
        "workers, optionally Spark Connect) on 127.0.0.1, with pyspark's own "
        "launcher.",
    )
    parser.add_argument(
        "action",
        choices=["start", "stop", "status", "url"],
        help="url prints the master URL (with --connect: the Connect URL)",
    )
    parser.add_argument(
        "--dir", required=True, help="state, logs and work dirs of the cluster"
    )
    parser.add_argument("--workers", type=int, default=2, help="default: 2")
    parser.add_argument("--cores", type=int, default=1, help="per worker; default: 1")
    parser.add_argument("--memory", default="2g", help="per worker; default: 2g")
    parser.add_argument(
        "--connect",
        action="store_true",
        help="start: also start a Spark Connect server; url: print its URL",
    )
    args = parser.parse_args(argv)
    base = os.path.abspath(args.dir)
    state = os.path.join(base, "cluster.json")
    if args.action == "start":
        if os.path.exists(state) and any(
            d.alive() for d in StandaloneCluster.load(base).daemons
        ):
            parser.exit(2, f"{parser.prog}: a cluster is running in {base}; stop it\n")
        os.makedirs(base, exist_ok=True)
        try:
            cluster = StandaloneCluster(
                base, workers=args.workers, cores=args.cores, memory=args.memory
            ).start()
            if args.connect:
                cluster.start_connect()
        except (OSError, TimeoutError, RuntimeError) as exc:
            parser.exit(2, f"{parser.prog}: could not start: {exc}\n")
        print(
            f"master   {cluster.master_url}  (web UI http://{HOST}:"
            f"{cluster.master.ui_port})"
        )
        if cluster.connect_url:
            print(f"connect  {cluster.connect_url}")
        print(f"stop it with: {parser.prog} stop --dir {args.dir}")
        return 0
    if not os.path.exists(state):
        parser.exit(2, f"{parser.prog}: no cluster.json in {base}\n")
    cluster = StandaloneCluster.load(base)
    if args.action == "url":
        url = cluster.connect_url if args.connect else cluster.master_url
        if url is None:
            parser.exit(2, f"{parser.prog}: no Connect server in {base}\n")
        print(url)
        return 0
    if args.action == "status":
        for d in cluster.daemons:
            print(f"{d.name:<10} pid {d.pid:<8} {'running' if d.alive() else 'gone'}")
        return 0
    left = cluster.stop()
    if left:
        print(f"still running: {left}", file=sys.stderr)
        return 1
    print(f"stopped {len(cluster.daemons)} daemons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
