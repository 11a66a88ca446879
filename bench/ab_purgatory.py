"""A/B of the purgatory between two tickwheel trees, runs alternating.

Each tree is a ``src`` directory with the extensions built in place
(``python setup.py build_ext --inplace`` in its checkout).  Every
measurement runs in a fresh interpreter with that tree first on
``sys.path`` and this checkout's ``bench/bench_purgatory.py`` as the driver,
so both trees see the same workload and the same driver code; the trees
alternate (A B A B ...) so load from other processes hits both alike.
Reported are medians over ``--pairs`` pairs, and the median of the
ratios within each pair:

* saturated: ``bench_purgatory.py --rate 5000000 --seconds 0.08`` (Kafka's
  TestPurgatoryPerformance shape: Poisson arrivals, 3 keys of 100,
  log-normal latency, 20 ms timeout, ~90 % early), achieved requests/s;
* paced: the same at 50,000 requests/s for ``--paced-seconds``, process CPU
  and driver-thread CPU per request;
* engine: the replay engine alone (``tickwheel.spark.engine.replay_table``
  on a generated trace, no Spark), events per CPU second, the best of 3
  replays in each run.

Rows are given for the purgatory with a Python ``DelayedOperation``
subclass (``tickwheel-subclass``, every tree) and with the compiled
``CountdownOperation`` (``tickwheel``, trees that have it)::

    python bench/ab_purgatory.py --tree before=/path/to/old/src \\
        --tree after=src --pairs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))

PROBE = r"""
import json, sys, time
sys.path[:0] = [{src!r}, {bench!r}]
import tickwheel
assert tickwheel.__file__.startswith({src!r}), tickwheel.__file__
assert tickwheel.USE_EXTENSIONS, "build the tree's extensions in place first"
what = {what!r}
if what == "engine":
    try:
        from tickwheel.spark.engine import replay_table
        from tickwheel.spark.trace import generate_trace
    except ImportError as exc:  # numpy/pyarrow: tickwheel[spark]
        print(json.dumps({{"missing": str(exc)}}))
        raise SystemExit(0)
    table = generate_trace({engine_requests}, 16, seed=1)
    replay_table(generate_trace(2000, 4, seed=2))  # warm-up
    best = float("inf")
    for _ in range(3):  # the best of 3: the loop's cost, not the host's moods
        c0 = time.process_time()
        replay_table(table)
        best = min(best, time.process_time() - c0)
    print(json.dumps({{"events_s": table.num_rows / best}}))
else:
    import bench_purgatory as bp
    kind, rate, seconds = what
    if kind == "tickwheel" and bp.CountdownOperation is None:
        print(json.dumps(None))
        raise SystemExit(0)
    num = max(1000, int(rate * seconds))
    w = bp.Workload(num, rate, 20, 2.0, 6.72, 3, 100, 1)
    print(json.dumps(bp.run_once(kind, w)))
"""


def probe(src: str, what: Any, engine_requests: int) -> Any:
    code = PROBE.format(
        src=os.path.abspath(src),
        bench=BENCH,
        what=what,
        engine_requests=engine_requests,
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise SystemExit(f"{src}: {what}: failed\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tree",
        action="append",
        required=True,
        metavar="NAME=SRC",
        help="a tree's name and src directory (give two)",
    )
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--saturated-seconds", type=float, default=0.08)
    ap.add_argument("--paced-seconds", type=float, default=4.0)
    ap.add_argument("--engine-requests", type=int, default=200_000)
    ap.add_argument("--json", metavar="PATH", help="also write every run here")
    args = ap.parse_args(argv)
    trees: list[tuple[str, str]] = []
    for spec in args.tree:
        name, sep, src = spec.partition("=")
        if not sep or not name or not src:
            ap.error(f"--tree must be NAME=SRC, got {spec!r}")
        if not os.path.isdir(os.path.join(src, "tickwheel")):
            ap.error(f"--tree {spec!r}: no tickwheel package in {src!r}")
        trees.append((name, src))
    if len(trees) != 2:
        ap.error(f"give two --tree options, got {len(trees)}")
    if args.pairs < 1:
        ap.error(f"--pairs must be >= 1, got {args.pairs}")
    for name in ("saturated_seconds", "paced_seconds"):
        if not getattr(args, name) > 0:
            ap.error(
                f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}"
            )
    if args.engine_requests < 1:
        ap.error(f"--engine-requests must be >= 1, got {args.engine_requests}")

    probes: list[tuple[str, Any, str]] = []
    for kind in ("tickwheel-subclass", "tickwheel"):
        probes.append(
            (
                f"{kind} saturated req/s",
                (kind, 5_000_000.0, args.saturated_seconds),
                "achieved",
            )
        )
        probes.append(
            (f"{kind} paced CPU µs/req", (kind, 50_000.0, args.paced_seconds), "cpu_us")
        )
        probes.append(
            (
                f"{kind} paced driver µs/req",
                (kind, 50_000.0, args.paced_seconds),
                "main_us",
            )
        )
    probes.append(("engine alone events/s", "engine", "events_s"))

    runs: dict[str, dict[str, list[float]]] = {n: {} for n, _ in trees}
    raw: list[dict[str, Any]] = []
    for pair in range(args.pairs):
        for name, src in trees:
            cache: dict[str, Any] = {}
            for label, what, field in probes:
                key = json.dumps(what)
                if key not in cache:
                    cache[key] = probe(src, what, args.engine_requests)
                    if isinstance(cache[key], dict) and "missing" in cache[key]:
                        if pair == 0:
                            print(
                                f"{name}: no engine row ({cache[key]['missing']}; "
                                'install tickwheel[spark] for it)',
                                file=sys.stderr,
                            )
                        cache[key] = None
                    raw.append(
                        {"pair": pair, "tree": name, "what": what, "result": cache[key]}
                    )
                result = cache[key]
                if result is not None:
                    runs[name].setdefault(label, []).append(result[field])
        print(f"pair {pair + 1}/{args.pairs} done", file=sys.stderr, flush=True)

    (a, _), (b, _) = trees
    print(
        f"| medians of {args.pairs} pairs | {a} | {b} | {b} ÷ {a} (min–max) |\n"
        "|---|---:|---:|---:|"
    )
    for label, _, _ in probes:
        va = runs[a].get(label)
        vb = runs[b].get(label)
        ma = statistics.median(va) if va else None
        mb = statistics.median(vb) if vb else None
        fmt = (lambda v: f"{v:,.0f}") if "/s" in label else (lambda v: f"{v:.2f}")
        ratio = "–"
        if va and vb:
            ratios = [y / x for x, y in zip(va, vb)]
            ratio = (
                f"{statistics.median(ratios):.2f}× "
                f"({min(ratios):.2f}–{max(ratios):.2f})"
            )
        print(
            f"| {label} | {fmt(ma) if ma else '–'} "
            f"| {fmt(mb) if mb else '–'} | {ratio} |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"trees": dict(trees), "runs": raw}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
