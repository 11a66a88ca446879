"""W1 and W2-sliding on several Python versions: one table, versions in turn.

Runs ``bench/measure.py interleaved`` (every implementation back to back in
each round, ratios taken within a round) once per interpreter, the
interpreters in turn, ``--repeat`` times, and prints a Markdown table of the
medians per version: tickwheel's time, how many times slower heapq, asyncio
and uvloop are, and the ``floor-handle`` row (the loop, a compiled schedule
that reads the clock and returns a new cancellable handle, and that
handle's cancel: tickwheel's call shape with no wheel behind it), and
tickwheel against ``floor-node``, the same handle the size of a tickwheel
node::

    python bench/versions.py --python python3.11 --python python3.14 --repeat 2

Each ``--python`` is a command (split like a shell would), so an interpreter
in a container or chroot works too; it must import tickwheel (installed, or
on its ``PYTHONPATH``) and, for the floor rows, Cython.  ``--json PATH``
also saves the raw results; ``--render PATH`` prints the table of a saved
run and measures nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
IMPLS = "heapq,asyncio,uvloop,floor,floor-clock,floor-handle,floor-node"
PEERS = ("heapq", "asyncio", "uvloop")
WORKLOADS = {"W1-add": "W1 `schedule`", "W2-sliding": "W2 sliding window"}


def run_one(python: str, n: int, rounds: int, impls: str) -> dict[str, Any]:
    """One ``measure.py interleaved`` run on ``python``: its JSON result."""
    cmd = [
        *shlex.split(python),
        os.path.join(HERE, "measure.py"),
        "interleaved",
        impls,
        "--n",
        str(n),
        "--rounds",
        str(rounds),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"versions.py: {python!r} failed ({proc.returncode}): {tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (version, workload): medians over the runs of that version."""
    by_version: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_version.setdefault(run["python"], []).append(run)
    rows = []
    for version, vruns in by_version.items():
        for w in WORKLOADS:
            per = [r["workloads"][w] for r in vruns if w in r["workloads"]]
            if not per:
                continue

            def med(
                impl: str, key: str, per: list[dict[str, Any]] = per
            ) -> float | None:
                vals = [p[impl][key] for p in per if impl in p]
                return statistics.median(vals) if vals else None

            row: dict[str, Any] = {
                "python": version,
                "workload": w,
                "runs": len(per),
                "tickwheel_ns": med("tickwheel", "median_ns"),
                "floor_handle_ns": med("floor-handle", "median_ns"),
                "floor_node_ns": med("floor-node", "median_ns"),
            }
            for peer in PEERS:
                row[peer] = med(peer, "ratio_median")
            fh = med("floor-handle", "ratio_median")
            # tickwheel / floor-handle, and how far any timer of tickwheel's
            # call shape could get ahead of heapq (heapq / floor-handle).
            row["over_floor"] = 1 / fh if fh else None
            row["heapq_over_floor"] = row["heapq"] / fh if fh and row["heapq"] else None
            fn = med("floor-node", "ratio_median")
            row["over_node"] = 1 / fn if fn else None
            rows.append(row)
    return rows


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _ns(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f} ns"


def render(rows: list[dict[str, Any]]) -> str:
    out = [
        "| Python | workload | tickwheel | heapq | asyncio | uvloop "
        "| floor-handle | tickwheel ÷ floor-handle | heapq ÷ floor-handle "
        "| tickwheel ÷ floor-node |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['python']} | {WORKLOADS[r['workload']]} | {_ns(r['tickwheel_ns'])} "
            f"| {_x(r['heapq'])} | {_x(r['asyncio'])} | {_x(r['uvloop'])} "
            f"| {_ns(r['floor_handle_ns'])} | {_x(r['over_floor'])} "
            f"| {_x(r['heapq_over_floor'])} | {_x(r['over_node'])} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--python",
        action="append",
        metavar="CMD",
        help="an interpreter command (repeatable; default: this one)",
    )
    ap.add_argument("--n", type=int, default=200_000, help="timers per workload")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds per run")
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs per interpreter, in turn"
    )
    ap.add_argument("--impls", default=IMPLS, help="measure.py's comma-separated list")
    ap.add_argument("--json", metavar="PATH", help="also save the raw runs here")
    ap.add_argument("--render", metavar="PATH", help="print a saved run's table")
    args = ap.parse_args(argv)
    if args.render:
        try:
            with open(args.render) as f:
                runs = json.load(f)["runs"]
        except (OSError, ValueError, KeyError) as exc:
            ap.error(f"--render {args.render!r}: {exc}")
        print(render(summarize(runs)))
        return 0
    for name, value in (
        ("--n", args.n),
        ("--rounds", args.rounds),
        ("--repeat", args.repeat),
    ):
        if value < 1:
            ap.error(f"{name} must be >= 1, got {value}")
    if args.json and os.path.exists(args.json):
        ap.error(f"--json {args.json!r} exists; choose a new path")
    pythons = args.python or [shlex.quote(sys.executable)]
    runs = []
    for _ in range(args.repeat):
        for py in pythons:
            runs.append(run_one(py, args.n, args.rounds, args.impls))
            print(f"# {runs[-1]['python']}: run {len(runs)} done", file=sys.stderr)
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump({"n": args.n, "rounds": args.rounds, "runs": runs}, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    print(render(summarize(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
