"""What a real server gains on the tickwheel loop: three workloads, four loops.

1. ``http``: an aiohttp server, every handler inside ``asyncio.timeout``,
   loaded by ``wrk`` over a few hundred keep-alive connections.
2. ``ws``: a websockets server holding many idle connections (pings on) with
   a trickle of echoes, its clients spread over a few processes.
3. ``idle``: 10,000 connections sending a small message every 10-50 ms,
   the server moving each connection's idle timeout per message
   (``cancel`` + ``call_later``, or tickwheel's ``postpone``).

Each on asyncio's loop, tickwheel over it, uvloop and tickwheel over uvloop,
rounds interleaved, medians.  The server runs pinned to the first CPU and
the load (wrk, clients) to the second (``taskset``).  ``wrk`` is a Debian
package: ``apt-get install -y wrk``.  Workloads, tables and how to read them:
bench/README.md ("A real server").

    python bench/bench_server.py            # full run (~30 min), writes results
    python bench/bench_server.py --quick    # smoke run (~1 min)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LOAD = [sys.executable, str(HERE / "server_load.py")]
LOOPS = ("asyncio", "tickwheel", "uvloop", "tickwheel-uvloop")
NEEDS = ("aiohttp", "websockets", "uvloop")  # the bench extra: servers, clients
BASE = {"tickwheel": "asyncio", "tickwheel-uvloop": "uvloop"}
FULL = {
    "rounds": 5, "ws_rounds": 2, "seconds": 4.0, "wrk_conns": 256,
    "ws_conns": 6_000, "ws_procs": 3, "ws_seconds": 20.0, "ping": 20.0,
    "ws_rate": 200.0, "idle_conns": 10_000, "idle_procs": 2, "idle": 3.0,
}  # fmt: skip
CONFIG = {  # which settings each workload reads
    "http": ("rounds", "seconds", "wrk_conns"),
    "ws": ("ws_rounds", "ws_conns", "ws_procs", "ws_seconds", "ping", "ws_rate"),
    "idle": ("rounds", "seconds", "idle_conns", "idle_procs", "idle"),
}
QUICK = {
    "rounds": 1, "ws_rounds": 1, "seconds": 1.0, "wrk_conns": 32,
    "ws_conns": 300, "ws_procs": 2, "ws_seconds": 2.0, "ping": 0.5,
    "ws_rate": 50.0, "idle_conns": 200, "idle_procs": 2, "idle": 0.3,
}  # fmt: skip


def pinning() -> tuple[list[str], list[str]]:
    """``taskset`` prefixes: server on one CPU, load on another (if 2+)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shutil.which("taskset") is None:
        return [], []
    return ["taskset", "-c", str(cpus[0])], ["taskset", "-c", str(cpus[1])]


SERVER_CPU, LOAD_CPU = pinning()


class Server:
    """A server process (server_load.py serve) and its control connection."""

    def __init__(self, workload: str, loop: str, *opts: str) -> None:
        cmd = SERVER_CPU + LOAD + ["serve", workload, loop, *opts]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "PORTS":
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"server {workload}/{loop} did not start: {line}")
        self.port, ctl = int(line[1]), int(line[2])
        self.ctl = socket.create_connection(("127.0.0.1", ctl))
        self.ctl_file = self.ctl.makefile("r")

    def ask(self, cmd: str) -> dict[str, Any]:
        self.ctl.sendall(cmd.encode() + b"\n")
        return json.loads(self.ctl_file.readline())  # type: ignore[no-any-return]

    def finish(self) -> dict[str, Any]:
        """Close every connection; the server's timer counts; the process ends."""
        counts = self.ask("final")
        self.ctl_file.close()
        self.ctl.close()
        self.proc.wait(timeout=60)
        return counts


class Clients:
    """Client processes (server_load.py client) sharing ``count`` connections."""

    def __init__(self, workload: str, port: int, count: int, procs: int,
                 *opts: str) -> None:  # fmt: skip
        self.procs = [
            subprocess.Popen(
                LOAD_CPU
                + LOAD
                + [
                    "client",
                    workload,
                    str(port),
                    str(count // procs),
                    "--seed",
                    str(i),
                    *opts,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for i in range(procs)
        ]
        for p in self.procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "READY":
                self.kill()
                raise RuntimeError(f"{workload} client did not connect")

    def say(self, line: str) -> None:
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.write(line + "\n")
            p.stdin.flush()

    def results(self) -> list[dict[str, Any]]:
        out = []
        for p in self.procs:
            stdout, _ = p.communicate(timeout=120)
            out.append(json.loads(stdout.strip().splitlines()[-1]))
        return out

    def kill(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def parse_wrk(out: str) -> dict[str, float]:
    """Requests/s and the p50/p99 latency (seconds) of ``wrk --latency``."""
    res = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])}  # type: ignore[index]
    for pct in ("50", "99"):
        m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)
        assert m is not None, out
        res[f"p{pct}_s"] = float(m[1]) * _UNITS[m[2]]
    m = re.search(r"(\d+) requests in", out)
    res["requests"] = float(m[1]) if m else 0.0
    res["errors"] = float("Socket errors" in out or "Non-2xx" in out)
    return res


def wrk(port: int, conns: int, seconds: float) -> str:
    cmd = LOAD_CPU + ["wrk", "-t2", f"-c{conns}", f"-d{seconds:g}s", "--latency",
                      "--timeout", "10s", f"http://127.0.0.1:{port}/"]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def run_http(loop: str, cfg: dict[str, Any]) -> dict[str, Any]:
    server = Server("http", loop)
    try:
        wrk(server.port, cfg["wrk_conns"], 1)  # warm-up
        server.ask("mark")
        res = parse_wrk(wrk(server.port, cfg["wrk_conns"], cfg["seconds"]))
        stats = server.ask("stats")
    finally:
        counts = server.finish()
    res["cpu_per_msg_s"] = stats["cpu_s"] / max(stats["messages"], 1)
    res["served"] = stats["messages"]
    return {**res, "timers": counts}


def run_ws(loop: str, cfg: dict[str, Any]) -> dict[str, Any]:
    server = Server("ws", loop, "--ping-interval", str(cfg["ping"]))
    try:
        clients = Clients("ws", server.port, cfg["ws_conns"], cfg["ws_procs"],
                          "--rate", str(cfg["ws_rate"] / cfg["ws_procs"]))  # fmt: skip
        time.sleep(1.0)
        server.ask("mark")
        clients.say("go")
        time.sleep(cfg["ws_seconds"])
        stats = server.ask("stats")
        clients.say("stop")
        rtts = sorted(r for res in clients.results() for r in res["rtts"])
    finally:
        counts = server.finish()
    return {
        "rss_mb": stats["rss"] / 2**20,
        "idle_cpu_pct": 100 * stats["cpu_s"] / stats["wall_s"],
        "rtt_p99_s": rtts[int(0.99 * (len(rtts) - 1))] if rtts else float("nan"),
        "echoes": len(rtts),
        "gc_p99_s": stats["gc_p99_s"], "gc_max_s": stats["gc_max_s"],
        "gc_count": stats["gc_count"], "gc_full_s": stats["gc_full_s"],
        "connections": stats["connections"],
        "timers": counts,
    }  # fmt: skip


def window(pid: int, seconds: float, perf: bool) -> dict[str, float]:
    """Wait out the measured window; with ``perf``, sample the server meanwhile.

    Returns where the server's CPU went (``perf record`` of its process, by
    shared object: the kernel, the interpreter, tickwheel's extension), in
    percent of the samples; {} without ``perf``.
    """
    if not perf:
        time.sleep(seconds)
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        data = str(Path(tmp) / "perf.data")
        subprocess.run(["perf", "record", "-F", "499", "-o", data, "-p", str(pid),
                        "--", "sleep", f"{seconds:g}"],
                       capture_output=True, check=True)  # fmt: skip
        report = subprocess.run(
            ["perf", "report", "-i", data, "--no-children", "--sort", "dso", "--stdio"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return perf_shares(report)


SHARES = ("kernel_pct", "python_pct", "tickwheel_pct", "other_pct")


def perf_shares(report: str) -> dict[str, float]:
    """``perf report --sort dso`` lines grouped: kernel, interpreter, tickwheel."""
    shares = dict.fromkeys(SHARES, 0.0)
    for pct, dso in re.findall(r"^\s+([\d.]+)%\s+(\S+)", report, re.M):
        if dso.startswith("[kernel"):
            key = "kernel_pct"
        elif dso.startswith(("libpython", "python")):
            key = "python_pct"
        elif dso.startswith(("_wheel.", "_purgatory.")):
            key = "tickwheel_pct"
        else:
            key = "other_pct"
        shares[key] += float(pct)
    return shares


def run_idle(loop: str, mode: str, cfg: dict[str, Any]) -> dict[str, Any]:
    idle = str(cfg["idle"])
    server = Server("idle", loop, "--mode", mode, "--idle", idle)
    try:
        # Without a timer nothing closes them: the clients need not wait.
        wait = idle if mode != "none" else "0"
        clients = Clients("idle", server.port, cfg["idle_conns"], cfg["idle_procs"],
                          "--idle", wait)  # fmt: skip
        clients.say("go")
        time.sleep(min(1.0, cfg["seconds"]))  # every connection sending
        server.ask("mark")
        shares = window(server.proc.pid, cfg["seconds"], cfg.get("perf", False))
        stats = server.ask("stats")
        clients.say("stop")  # now idle: every idle timeout fires
        sent = clients.results()
    finally:
        counts = server.finish()
    return {
        "cpu_per_msg_s": stats["cpu_s"] / max(stats["messages"], 1),
        "msgs_rate": stats["messages"] / stats["wall_s"],
        "cpu_pct": 100 * stats["cpu_s"] / stats["wall_s"],
        "left_open": sum(s["open"] for s in sent),
        "timers": counts,
        **({"perf": shares} if shares else {}),
    }


def variants(workloads: list[str], loops: list[str]) -> list[tuple[str, str, str]]:
    """(workload, loop, mode) of every run of one round."""
    out = []
    for w in workloads:
        for loop in loops:
            out.append((w, loop, "cancel"))
            if w == "idle" and loop.startswith("tickwheel"):
                out.append((w, loop, "postpone"))
            elif w == "idle":  # the floor: no idle timeout at all
                out.append((w, loop, "none"))
    return out


def measure(opts: argparse.Namespace, cfg: dict[str, Any]) -> dict[str, Any]:
    """Every variant once per round, the order rotated each round."""
    runs: dict[str, list[dict[str, Any]]] = {}
    todo = variants(opts.workloads, opts.loops)
    rounds = max(cfg["rounds"], cfg["ws_rounds"])
    for r in range(rounds):
        shift = r % len(todo)
        for w, loop, mode in todo[shift:] + todo[:shift]:
            if w == "ws" and r >= cfg["ws_rounds"]:
                continue
            if w != "ws" and r >= cfg["rounds"]:
                continue
            key = f"{w}/{loop}/{mode}"
            if w == "http":
                res = run_http(loop, cfg)
            elif w == "ws":
                res = run_ws(loop, cfg)
            else:
                res = run_idle(loop, mode, cfg)
            print(f"round {r + 1}/{rounds} {key}: {brief(res)}", file=sys.stderr)
            runs.setdefault(key, []).append(res)
    return runs


def brief(res: dict[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:.4g}" for k, v in res.items() if isinstance(v, (int, float))
    )


METRICS = {
    "http": ("rps", "p50_s", "p99_s", "cpu_per_msg_s"),
    "ws": ("rss_mb", "idle_cpu_pct", "rtt_p99_s", "gc_p99_s", "gc_max_s", "gc_full_s"),
    "idle": ("cpu_per_msg_s", "msgs_rate", "cpu_pct"),
}


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per variant; per-round ratios against the base loop, medianed."""
    out: dict[str, Any] = {}
    for key, rs in runs.items():
        w, loop, mode = key.split("/")
        row: dict[str, Any] = {}
        for m in METRICS[w]:
            row[m] = statistics.median(r[m] for r in rs)
            base = runs.get(f"{w}/{BASE.get(loop, loop)}/cancel")
            if base is not None and loop in BASE:
                pairs = zip((r[m] for r in rs), (b[m] for b in base))
                ratios = [a / b for a, b in pairs if b]
                if ratios:
                    row[m + "_ratio"] = statistics.median(ratios)
        row["timers"] = timer_check(rs)
        out[key] = row
    return out


def timer_check(rs: list[dict[str, Any]]) -> dict[str, int]:
    """Timer counts summed over the rounds; ``lost`` = scheduled - fired - cancelled."""
    total: dict[str, int] = {}
    for r in rs:
        for k, v in r["timers"].items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
    total["lost"] = total["scheduled"] - total["fired"] - total["cancelled"]
    return total


def fmt(m: str, v: float) -> str:
    if m.endswith("_s"):
        return f"{v * 1e6:,.1f} µs" if m == "cpu_per_msg_s" else f"{v * 1e3:,.2f} ms"
    if m == "rss_mb":
        return f"{v:,.0f} MB"
    if m.endswith("pct"):
        return f"{v:.1f} %"
    return f"{v:,.0f}"


LABELS = {
    "http/rps": "1: aiohttp, `asyncio.timeout` per request: requests/s",
    "http/p50_s": "1: p50 latency", "http/p99_s": "1: p99 latency",
    "http/cpu_per_msg_s": "1: server CPU per request",
    "ws/rss_mb": "2: websockets, idle connections: RSS",
    "ws/idle_cpu_pct": "2: server CPU (pings + trickle)",
    "ws/rtt_p99_s": "2: echo round trip p99",
    "ws/gc_p99_s": "2: GC pause p99 (CPU time)",
    "ws/gc_max_s": "2: GC pause max (CPU time)",
    "ws/gc_full_s": "2: a full collection, `gc.collect()` (CPU time)",
    "idle/cpu_per_msg_s": "3: idle timeout moved per message: CPU per message",
    "idle/msgs_rate": "3: messages/s served", "idle/cpu_pct": "3: server CPU",
}  # fmt: skip


def table(summary: dict[str, Any]) -> str:
    """One Markdown table: a row per metric, a column per loop (ratio to base)."""
    head = "| | asyncio | tickwheel over it | uvloop | tickwheel over it |"
    lines = [head, "|---|---:|---:|---:|---:|"]
    for label_key, label in LABELS.items():
        w, m = label_key.split("/")
        for mode in ("cancel", "postpone", "none"):
            if mode != "cancel" and (w != "idle" or m != "cpu_per_msg_s"):
                continue
            cells = [cell(summary.get(f"{w}/{loop}/{mode}"), m) for loop in LOOPS]
            if all(c == "–" for c in cells):
                continue
            if mode == "postpone":
                label = "3: the same with `postpone()`"
            elif mode == "none":
                label = "3: no idle timeout at all (the floor)"
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cell(row: dict[str, Any] | None, m: str) -> str:
    if row is None:
        return "–"
    text = fmt(m, row[m])
    if m + "_ratio" in row:
        text += f" ({row[m + '_ratio']:.2f}x)"
    return text


def timers_table(summary: dict[str, Any]) -> str:
    lines = ["| run | scheduled | fired | cancelled | lost | early | pending at end |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for key, row in summary.items():
        t = row["timers"]
        lines.append(
            f"| {key} | {t['scheduled']:,} | {t['fired']:,} | {t['cancelled']:,} "
            f"| {t['lost']} | {t['early']} | {t.get('pending', '–')} |"
        )
    return "\n".join(lines)


def perf_table(runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Workload 3's CPU by where it went (``--perf`` runs only): medians."""
    keys = [k for k, rs in runs.items() if any("perf" in r for r in rs)]
    if not keys:
        return []
    lines = ["| run | kernel | interpreter | tickwheel | other |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for key in keys:
        shares = [r["perf"] for r in runs[key] if "perf" in r]
        cells = [statistics.median(s[k] for s in shares) for k in SHARES]
        lines.append(f"| {key} | " + " | ".join(f"{c:.1f} %" for c in cells) + " |")
    return [
        "Where workload 3's server CPU went (`perf record` of the server "
        "process, samples by shared object):",
        "\n".join(lines),
    ]


def plot(summary: dict[str, Any], path: Path) -> None:
    """Requests/s and p99 per loop (workload 1); CPU per message (workload 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(12, 3.6))
    names = ["asyncio", "tickwheel\n(asyncio)", "uvloop", "tickwheel\n(uvloop)"]
    colors = ["#888888", "#1f77b4", "#bbbbbb", "#2ca02c"]
    http = [summary.get(f"http/{lp}/cancel") for lp in LOOPS]
    ax1.bar(names, [r["rps"] if r else 0 for r in http], color=colors)
    ax1.set_title("1: aiohttp requests/s (higher is better)", fontsize=9)
    ax2.bar(names, [r["p99_s"] * 1e3 if r else 0 for r in http], color=colors)
    ax2.set_title("1: p99 latency, ms (lower is better)", fontsize=9)
    width = 0.28
    modes = {"cancel": "cancel + call_later", "postpone": "postpone()",
             "none": "no timer (floor)"}  # fmt: skip
    for i, (mode, label) in enumerate(modes.items()):
        rows = [summary.get(f"idle/{lp}/{mode}") for lp in LOOPS]
        xs = [j + (i - 1) * width for j in range(len(LOOPS))]
        color = ("#1f77b4", "#ff7f0e", "#cccccc")[i]
        heights = [r["cpu_per_msg_s"] * 1e6 if r else 0 for r in rows]
        ax3.bar(xs, heights, width, label=label, color=color)
    ax3.set_xticks(range(len(LOOPS)), names)
    ax3.set_title("3: server CPU per message, µs (lower is better)", fontsize=9)
    ax3.legend(fontsize=8)
    for ax in (ax1, ax2, ax3):
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(data: dict[str, Any]) -> str:
    summary = data["summary"]
    return "\n\n".join([
        f"# A real server on four loops ({data['machine']})",
        "; ".join(f"`{c}`" for c in dict.fromkeys(data["commands"].values()))
        + f"; {data['pinning']}; medians of the rounds, "
        "ratios: medians of per-round ratios to the base loop.",
        table(summary),
        "Timers the servers' own code scheduled (summed over the rounds):",
        timers_table(summary),
        *perf_table(data["runs"]),
        "Configuration of each workload's run: `"
        + json.dumps(data["configs"]) + "`",
    ]) + "\n"  # fmt: skip


def machine() -> str:
    return f"{platform.machine()}-py{platform.python_version()}"


def check_names(
    p: argparse.ArgumentParser, name: str, given: list[str], allowed: Collection[str]
) -> None:
    """Exit 2 naming the first of ``given`` that is not in ``allowed``."""
    bad = [x for x in given if x not in allowed]
    if bad:
        p.error(f"{name}: unknown {bad[0]!r} (choose from {', '.join(allowed)})")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--quick", action="store_true", help="smoke run: seconds, small counts"
    )
    p.add_argument("--workloads", default="http,ws,idle", help="comma-separated subset")
    p.add_argument("--loops", default=",".join(LOOPS), help="comma-separated subset")
    p.add_argument("--rounds", type=int, help="rounds (default: 5, ws 2; quick 1)")
    p.add_argument("--out", type=Path, help="results JSON (default: bench/results/"
                   "server-<machine>.json; not written with --quick)")  # fmt: skip
    p.add_argument(
        "--render", type=Path, help="re-render a results JSON, measure nothing"
    )
    p.add_argument("--perf", action="store_true", help="workload 3: sample the "
                   "server with perf record (Debian: apt-get install -y "
                   "linux-perf) and tabulate where its CPU went")  # fmt: skip
    opts = p.parse_args(argv)
    opts.workloads = opts.workloads.split(",")
    opts.loops = opts.loops.split(",")
    check_names(p, "--workloads", opts.workloads, METRICS)
    check_names(p, "--loops", opts.loops, LOOPS)
    if opts.rounds is not None and opts.rounds < 1:
        p.error(f"--rounds must be >= 1, got {opts.rounds}")
    # Where the results go, and what is already there, settled before
    # measuring: a run of half an hour must not end in a traceback that
    # loses it.  --render reads its file and writes beside --out, or it.
    name = "--out" if opts.out is not None else "the results file"
    opts.out = opts.out or opts.render
    if opts.out is None and not opts.quick:
        opts.out = HERE / "results" / f"server-{machine()}.json"
    if opts.out is not None and not opts.out.parent.is_dir():
        p.error(f"{name}: {opts.out}: directory {opts.out.parent} does not exist")
    opts.previous = None
    if opts.render is not None:
        opts.previous = read_results(p, "--render", opts.render)
    elif opts.out is not None and opts.out.exists():
        opts.previous = read_results(p, name, opts.out)
    return opts


def read_results(p: argparse.ArgumentParser, name: str, path: Path) -> Any:
    """A results JSON, or exit 2 naming ``name`` and ``path``."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        p.error(f"{name}: {path}: not a results JSON ({exc})")
    if not isinstance(data, dict) or "runs" not in data:
        p.error(f"{name}: {path}: not a results JSON (no 'runs')")
    return data


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    if opts.render is None and "http" in opts.workloads and not shutil.which("wrk"):
        print("bench_server.py: wrk not found; install it (Debian/Ubuntu: "
              "apt-get install -y wrk) or leave out workload 1 with "
              "--workloads ws,idle", file=sys.stderr)  # fmt: skip
        return 2
    if opts.perf and not shutil.which("perf"):
        print("bench_server.py: --perf needs perf (Debian: apt-get install -y "
              "linux-perf)", file=sys.stderr)  # fmt: skip
        return 2
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if opts.render is None and missing:
        print(f"bench_server.py: {', '.join(missing)} not installed; install the "
              "bench extra: pip install '.[bench]'", file=sys.stderr)  # fmt: skip
        return 2
    out = opts.out
    if opts.render is not None:
        data = opts.previous
    else:
        data = measure_into(opts, argv, opts.previous)
        if out is not None:  # first: the runs are kept even if rendering fails
            out.write_text(json.dumps(data, indent=1) + "\n")
    text = render(data)
    print(text)
    if out is not None:
        out.with_suffix(".md").write_text(text)
        plot(data["summary"], out.with_suffix(".png"))
    return 0


def measure_into(
    opts: argparse.Namespace, argv: list[str] | None, previous: Any
) -> dict[str, Any]:
    """Measure; the workloads not run this time keep their runs from
    ``previous`` (the results file as it was, or None)."""
    cfg = dict(QUICK if opts.quick else FULL)
    if opts.rounds is not None:
        cfg["rounds"] = cfg["ws_rounds"] = opts.rounds
    cfg["perf"] = opts.perf
    runs = measure(opts, cfg)
    command = "python bench/bench_server.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    data: dict[str, Any] = previous or {"commands": {}, "configs": {}, "runs": {}}
    for w in opts.workloads:
        data["runs"] = {
            k: v for k, v in data["runs"].items() if not k.startswith(w + "/")
        }
        data["commands"][w] = command
        data["configs"][w] = {k: v for k, v in cfg.items() if k in CONFIG[w]}
    data["runs"].update(runs)
    data.update(
        machine=machine(), summary=summarise(data["runs"]),
        pinning=(f"server on CPU {SERVER_CPU[-1]}, load on CPU {LOAD_CPU[-1]}"
                 if SERVER_CPU else "not pinned (fewer than 2 CPUs)"),
    )  # fmt: skip
    return data


if __name__ == "__main__":
    sys.exit(main())
