"""Run the whole benchmark suite and render its report.

    python bench/run.py            # full: N = 200,000; W4/W6 at 10^6; W5 to 10^6
    python bench/run.py --quick    # CI smoke: small sizes, under two minutes
    python bench/run.py --sizes 1000,10000,100000,1000000,10000000   # W5 to 10^7

It runs the pytest-benchmark suite (W1, W2, W3-manual, W5), then
``bench/measure.py``: W1 and W2-sliding again in interleaved rounds (every
implementation back to back in each round, so a drift in the host's speed
cannot bias a ratio), and one fresh subprocess per implementation for W3
real-time lateness (the tickwheel rows and the host's floor five times),
W4 memory and W6 GC.  It writes, under ``bench/results/``:

* ``<name>.json``: everything measured, with machine, Python and commit;
* ``<name>.md``: the Markdown tables (bench/README.md quotes them);
* ``scaling.png`` / ``scaling.svg``: log-log per-operation cost against N;
* ``lateness.png``: the lateness distribution of W3 (real time).

``<name>`` is ``<machine>-py<version>-<commit>`` unless ``--name`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

LATENESS_IMPLS = [
    "floor-spin",
    "floor-tick",
    "tickwheel",
    "tickwheel-inline",
    "tickwheel-kafka-cascade",
    "heapq",
    "sched",
    "asyncio",
    "uvloop",
    "tickwheel-py",
]
# Real-time lateness on a shared host is at the mercy of its stalls (a busy
# loop here sees gaps of several ms every second).  These rows are measured
# LATENESS_REPEAT times, in turn with the floor, and the run with the median
# p99 is shown, with every run's p99 next to it.
LATENESS_REPEATED = ["floor-spin", "floor-tick", "tickwheel", "tickwheel-inline"]
LATENESS_REPEAT = 5
STALL_IMPLS = ["tickwheel", "tickwheel-due-wakes", "tickwheel-kafka-cascade"]
DISPATCH_IMPLS = ["pool", "pool-per-task", "pool-batch", "default", "inline"]
# sched is left out of W4/W6: its cancel is O(n) (cancelling 10^6 events is
# quadratic), and its events sit in a plain heapq list like heapq's entries.
MEMORY_IMPLS = ["tickwheel", "heapq", "asyncio", "uvloop", "tickwheel-py"]


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=HERE,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _available(impl: str) -> bool:
    if impl == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            return False
    return True


SUITE = ["test_bench_wheel.py", "test_bench_scaling.py"]  # W1, W2, W3-manual, W5


def run_pytest_benchmark(n: int, sizes: str, json_path: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *(os.path.join(HERE, f) for f in SUITE),
        "--benchmark-only",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--bench-n={n}",
        f"--bench-sizes={sizes}",
        f"--benchmark-json={json_path}",
    ]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=os.path.dirname(HERE))
    with open(json_path) as f:
        return json.load(f)


def run_measure(what: str, impl: str, n: int, *extra: str) -> dict[str, Any]:
    cmd = [
        sys.executable,
        os.path.join(HERE, "measure.py"),
        what,
        impl,
        f"--n={n}",
        *extra,
    ]
    print("$", " ".join(cmd[1:]), flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_lateness(n: int, repeat: int) -> dict[str, Any]:
    """W3 real time: each implementation once, the repeated ones ``repeat`` times."""
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _ in range(repeat):
        for impl in LATENESS_REPEATED:
            runs[impl].append(run_measure("lateness", impl, n))
    out: dict[str, Any] = {}
    for impl in LATENESS_IMPLS:
        if not _available(impl):
            continue
        if impl not in runs:
            out[impl] = run_measure("lateness", impl, n)
            continue
        by_p99 = sorted(runs[impl], key=lambda r: r["lateness_ms"]["p99"])
        shown = dict(by_p99[len(by_p99) // 2])
        shown["p99_runs"] = [r["lateness_ms"]["p99"] for r in runs[impl]]
        shown["early"] = sum(r["early"] for r in runs[impl])
        shown["fired"] = sum(r["fired"] for r in runs[impl])
        out[impl] = shown
    return out


def summarize_benchmarks(data: dict[str, Any]) -> dict[str, Any]:
    """group -> impl -> ns/op (median), and W5 curves: group -> impl -> {n: ns/op}."""
    table: dict[str, dict[str, float]] = defaultdict(dict)
    curves: dict[str, dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for bench in data["benchmarks"]:
        if "n" not in bench.get("extra_info", {}):
            continue  # not one of this suite's workloads
        n = bench["extra_info"]["n"]
        per_op = bench["stats"]["median"] / n * 1e9
        if bench["group"].startswith("W5-"):
            impl = bench["extra_info"]["impl"]
            curves[bench["group"]][impl][n] = per_op
        else:
            table[bench["group"]][bench["params"]["impl"]] = per_op
    return {"table": table, "curves": curves}


def _curves(report: dict[str, Any]) -> dict[str, dict[str, dict[int, float]]]:
    # JSON turns the integer N keys into strings; give them back as ints.
    return {
        group: {
            impl: {int(n): v for n, v in curve.items()} for impl, curve in by.items()
        }
        for group, by in report["timed"]["curves"].items()
    }


FLOORS = ("floor", "floor-clock")
HANDLE_FLOOR = "floor-handle"  # later runs only: a report without it renders as before


def _floor_note(workloads: dict[str, Any]) -> str:
    """Where a tickwheel iteration goes, from the floor rows."""
    parts = []
    with_handle = False
    for group, row in workloads.items():
        if not all(k in row for k in ("tickwheel", *FLOORS)):
            continue
        tw, fl, fc = (row[k]["median_ns"] for k in ("tickwheel", *FLOORS))
        fh = row[HANDLE_FLOOR]["median_ns"] if HANDLE_FLOOR in row else None
        part = (
            f"{group}: of tickwheel's {tw:,.0f} ns, the loop and two C calls "
            f"take {fl:,.0f} (`floor`), reading the clock {fc - fl:,.0f} more "
            f"(`floor-clock`), "
        )
        if fh is None:
            part += f"the wheel {tw - fc:,.0f}"
            bound, name, what = fc, "floor-clock", "reads the clock"
        else:
            with_handle = True
            part += (
                f"returning a new cancellable handle {fh - fc:,.0f} more "
                f"(`floor-handle`), the wheel {tw - fh:,.0f} "
                f"(tickwheel ÷ floor-handle = {tw / fh:.2f}×)"
            )
            bound, name, what = fh, "floor-handle", "returns a handle"
        if "heapq" in row:
            part += (
                f"; heapq ÷ {name} = {row['heapq']['median_ns'] / bound:.1f}×, "
                f"the most any timer that {what} could show against heapq"
            )
        parts.append(part)
    head = (
        "Floors (no timer): `floor` calls `operator.is_` and `id`, `floor-clock` "
        "a compiled schedule that only reads CLOCK_MONOTONIC and adds the delay "
    )
    if with_handle:
        head += (
            "and `floor-handle` one that also returns a new handle (a freelisted "
            "compiled object) whose type's `cancel` drops the callable "
        )
    return head + "(bench/_floor.pyx); ratios of medians. " + ". ".join(parts) + "."


def render_markdown(report: dict[str, Any]) -> str:
    meta = report["meta"]
    out = [
        f"Machine: {meta['cpu']} ({meta['cores']} cores), {meta['platform']}; "
        f"Python {meta['python']}; tickwheel commit {meta['commit']}; "
        f"N = {meta['n']:,} per round; medians. Command: `{meta['command']}`.",
        "",
        "**Time per operation** (lower is better; in brackets: × tickwheel)",
        "",
    ]
    table = report["timed"]["table"]
    impls = ["tickwheel", "heapq", "sched", "asyncio", "uvloop", "tickwheel-py"]
    impls = [i for i in impls if any(i in row for row in table.values())]
    out.append("| workload | " + " | ".join(impls) + " |")
    out.append("|---|" + "---|" * len(impls))
    for group in ["W1-add", "W2-pair", "W2-bulk", "W2-sliding", "W3-manual"]:
        row = table.get(group, {})
        base = row.get("tickwheel")
        cells = []
        for impl in impls:
            if impl not in row:
                cells.append("–")
            elif impl == "tickwheel" or not base:
                cells.append(f"{row[impl]:,.0f} ns")
            else:
                cells.append(f"{row[impl]:,.0f} ns ({row[impl] / base:.1f}×)")
        out.append(f"| {group} | " + " | ".join(cells) + " |")

    inter = report.get("interleaved")
    if inter:
        out += [
            "",
            f"**Side by side**: {inter['rounds']} interleaved rounds (every "
            "implementation once per round, back to back); median ns/op and, "
            "in brackets, the median over rounds of the ratio to tickwheel "
            "in the same round (min–max)",
            "",
        ]
        present = [*impls, *FLOORS, HANDLE_FLOOR]
        names = [i for i in present if any(i in w for w in inter["workloads"].values())]
        out.append("| workload | " + " | ".join(names) + " |")
        out.append("|---|" + "---|" * len(names))
        for group, row in inter["workloads"].items():
            cells = []
            for impl in names:
                if impl not in row:
                    cells.append("–")
                    continue
                r = row[impl]
                cell = f"{r['median_ns']:,.0f} ns"
                if impl != "tickwheel":
                    cell += (
                        f" ({r['ratio_median']:.1f}×, "
                        f"{r['ratio_min']:.1f}–{r['ratio_max']:.1f})"
                    )
                cells.append(cell)
            out.append(f"| {group} | " + " | ".join(cells) + " |")
        out += ["", _floor_note(inter["workloads"])]

    out += [
        "",
        "**W3, real time**: N timers due within a 500 ms window; lateness = "
        "fire time − requested deadline (ms).  Two floors that are no timer: "
        "`floor-spin`, one thread busy-waiting to each deadline (this host's "
        "own stalls), and `floor-tick`, one thread sleeping to each 1 ms "
        "boundary and running what is due (rounding up to the tick, waking "
        "up, the callbacks' time: what a never-early 1 ms timer that sleeps "
        "can reach here).  Rows with several p99s were run that many times "
        "in turn; the run with the median p99 is shown.",
        "",
        "| implementation | min | p50 | p99 | max | early fires | drain s "
        "| p99 of each run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for impl, r in report["lateness"].items():
        q = r["lateness_ms"]
        runs = ", ".join(f"{x:.2f}" for x in r.get("p99_runs", ()))
        out.append(
            f"| {impl} (N={r['n']:,}) | {q['min']:.3f} | {q['p50']:.3f} | "
            f"{q['p99']:.3f} | {q['max']:.3f} | {r['early']} | {r['drain_s']:.3f} "
            f"| {runs or '–'} |"
        )

    if report.get("stall"):
        out += [
            "",
            "**W3 stall** (manual clock, jumping from one reaper wake-up to the "
            "next): the longest poll while tasks fall due; no task runs during "
            "a poll",
            "",
            "| implementation | worst poll ms | p99 poll ms | precascade CPU ms "
            "| wake-ups |",
            "|---|---|---|---|---|",
        ]
        for impl, r in report["stall"].items():
            out.append(
                f"| {impl} (N={r['n']:,}) | {r['worst_poll_ms']:.3f} | "
                f"{r['p99_poll_ms']:.3f} | {r['precascade_ms_total']:.1f} "
                f"| {r.get('wakes', '–')} |"
            )

    if report.get("dispatch"):
        out += [
            "",
            "**Dispatch**: N due no-op tasks (W3's deadlines) handed to the "
            "executor by one `advance_clock`; `pool*` is a "
            "`ThreadPoolExecutor(4)`: `pool` four runners per bucket taking "
            "its tasks in turn, `pool-per-task` one submit per task (Kafka's "
            "way), `pool-batch` one job per bucket (before; blocking tasks of "
            "a bucket ran one after another). Best of three",
            "",
            "| executor | in advance_clock ms | until the last ran ms | ns/task |",
            "|---|---|---|---|",
        ]
        for impl, r in report["dispatch"].items():
            out.append(
                f"| {impl} (N={r['n']:,}) | {r['dispatch_ms']:.1f} | "
                f"{r['total_ms']:.1f} | {r['ns_per_task']:.0f} |"
            )

    out += [
        "",
        "**W4, memory** per pending timer (shared no-op callback, handles kept "
        "in a preallocated list), and what is still held after cancelling all",
        "",
        "| implementation | tracemalloc B/timer | RSS B/timer | held after cancel |",
        "|---|---|---|---|",
    ]
    for impl, r in report["memory"].items():
        held_total = r["held_after_cancel_bytes_per_timer"] * r["traced_n"]
        out.append(
            f"| {impl} | {r['traced_bytes_per_timer']:.1f} | "
            f"{r['rss_bytes_per_timer']:.1f} | "
            f"{r['held_after_cancel_bytes_per_timer']:.2f} B/timer "
            f"({held_total / 1024:,.0f} KiB for {r['traced_n']:,}) |"
        )

    out += [
        "",
        "**W6, garbage collector**: median `gc.collect()` with N pending timers "
        "vs none",
        "",
        "| implementation | empty ms | loaded ms | ratio |",
        "|---|---|---|---|",
    ]
    for impl, r in report["gc"].items():
        out.append(
            f"| {impl} (N={r['n']:,}) | {r['collect_empty_ms']:.2f} | "
            f"{r['collect_loaded_ms']:.2f} | {r['ratio']:.2f}× |"
        )

    curves = _curves(report)
    if curves:
        out += ["", "**W5, scaling**: ns per operation by N", ""]
        for group in sorted(curves):
            sizes = sorted({n for c in curves[group].values() for n in c})
            out.append(
                f"| {group} | "
                + " | ".join(f"{n:,}" for n in sizes)
                + " | largest ÷ smallest |"
            )
            out.append("|---|" + "---|" * (len(sizes) + 1))
            for impl, curve in sorted(curves[group].items()):
                cells = [f"{curve[n]:,.0f}" if n in curve else "–" for n in sizes]
                ns = sorted(curve)
                growth = curve[ns[-1]] / curve[ns[0]]
                out.append(f"| {impl} | " + " | ".join(cells) + f" | {growth:.2f}× |")
            out.append("")
    return "\n".join(out) + "\n"


COLORS = {
    "floor-spin": "tab:gray",
    "floor-tick": "black",
    "tickwheel": "tab:green",
    "tickwheel-inline": "tab:olive",
    "tickwheel-py": "tab:red",
    "heapq": "tab:orange",
    "sched": "tab:brown",
    "asyncio": "tab:blue",
    "uvloop": "tab:purple",
    "tickwheel-kafka-cascade": "tab:cyan",
}


def render_plots(report: dict[str, Any], stem: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    curves = _curves(report)
    titles = {
        "W5-add": "W1 add",
        "W5-sliding": "W2 add+cancel (sliding window)",
        "W5-expire": "W3 expire (manual clock)",
    }
    groups = [g for g in ("W5-add", "W5-sliding", "W5-expire") if g in curves]
    if groups:
        fig, axes = plt.subplots(
            1, len(groups), figsize=(5 * len(groups), 4), squeeze=False
        )
        for ax, group in zip(axes[0], groups):
            for impl, curve in sorted(curves[group].items()):
                ns = sorted(curve)
                ax.plot(
                    ns,
                    [curve[n] for n in ns],
                    marker="o",
                    label=impl,
                    color=COLORS.get(impl),
                    linewidth=2.5 if impl == "tickwheel" else 1.2,
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(titles[group])
            ax.set_xlabel("timers (N)")
            ax.set_ylabel("ns per operation (median, lower is better)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        meta = report["meta"]
        fig.suptitle(
            f"tickwheel {meta['commit']} · Python {meta['python']} · {meta['cpu']}",
            fontsize=9,
        )
        fig.tight_layout()
        for ext in ("png", "svg"):
            path = os.path.join(RESULTS, f"scaling.{ext}")
            fig.savefig(path, dpi=110)
            written.append(path)
        plt.close(fig)
    if report["lateness"]:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for impl, r in report["lateness"].items():
            q = r["lateness_ms"]
            ax.plot(
                [0, 1, 2, 3],
                [q["min"], q["p50"], q["p99"], q["max"]],
                marker="o",
                label=impl,
                color=COLORS.get(impl),
                linewidth=2.5 if impl == "tickwheel" else 1.2,
            )
        ax.set_xticks([0, 1, 2, 3], ["min", "p50", "p99", "max"])
        ax.set_ylabel("lateness, ms (fire − deadline)")
        ax.set_yscale("symlog", linthresh=0.1)
        lowest = min(r["lateness_ms"]["min"] for r in report["lateness"].values())
        ax.set_ylim(bottom=min(-1.0, 3 * lowest))  # early fires, if any, show
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_title(
            f"W3: {next(iter(report['lateness'].values()))['n']:,} timers "
            "due within 500 ms"
        )
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = os.path.join(RESULTS, "lateness.png")
        fig.savefig(path, dpi=110)
        written.append(path)
        plt.close(fig)
    return written


def _in_run_order(report: dict[str, Any]) -> dict[str, Any]:
    """A report read back from JSON (saved with sorted keys), its rows in the
    order a run renders them."""
    for key, order in (
        ("lateness", LATENESS_IMPLS),
        ("stall", STALL_IMPLS),
        ("dispatch", DISPATCH_IMPLS),
        ("memory", MEMORY_IMPLS),
        ("gc", MEMORY_IMPLS),
    ):
        rows = report.get(key) or {}
        rank = {impl: i for i, impl in enumerate(order)}
        ranked = sorted(rows, key=lambda k: rank.get(k, len(order)))
        report[key] = {k: rows[k] for k in ranked}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke)")
    parser.add_argument("--n", type=int, help="timers per round for W1-W3")
    parser.add_argument("--sizes", help="W5 sizes, comma-separated")
    parser.add_argument("--memory-n", type=int, help="N for W4 and W6")
    parser.add_argument("--name", help="result file stem")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument(
        "--render",
        metavar="JSON",
        help="measure nothing: re-render the Markdown and plots of a saved report",
    )
    args = parser.parse_args(argv)
    if args.render:
        with open(args.render) as f:
            report = _in_run_order(json.load(f))
        stem = os.path.basename(args.render).removesuffix(".json")
        with open(os.path.join(RESULTS, f"{stem}.md"), "w") as f:
            f.write(render_markdown(report))
        for path in render_plots(report, stem):
            print("wrote", os.path.relpath(path))
        return 0
    n = args.n or (5_000 if args.quick else 200_000)
    sizes = args.sizes or ("1000,10000" if args.quick else "1000,10000,100000,1000000")
    memory_n = args.memory_n or (20_000 if args.quick else 1_000_000)
    os.makedirs(RESULTS, exist_ok=True)
    started = time.time()

    import tickwheel

    commit = _commit()
    meta = {
        "cpu": _cpu(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "commit": commit,
        "n": n,
        "sizes": sizes,
        "memory_n": memory_n,
        "accelerated": tickwheel.USE_EXTENSIONS,
        "command": "python bench/run.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
    }
    if not tickwheel.USE_EXTENSIONS:
        print("warning: tickwheel runs without its C extension", file=sys.stderr)
    machine = platform.machine()
    stem = args.name or f"{machine}-py{platform.python_version()}-{commit}"
    # The raw pytest-benchmark JSON is kept next to the report.
    raw = run_pytest_benchmark(n, sizes, os.path.join(RESULTS, f"{stem}-raw.json"))
    report: dict[str, Any] = {"meta": meta, "timed": summarize_benchmarks(raw)}
    report["interleaved"] = run_measure(
        "interleaved", "all", n, f"--rounds={3 if args.quick else 7}"
    )
    report["lateness"] = run_lateness(n, 1 if args.quick else LATENESS_REPEAT)
    report["stall"] = {i: run_measure("stall", i, n) for i in STALL_IMPLS}
    report["dispatch"] = {i: run_measure("dispatch", i, n) for i in DISPATCH_IMPLS}
    report["memory"] = {
        i: run_measure("memory", i, memory_n) for i in MEMORY_IMPLS if _available(i)
    }
    report["gc"] = {
        i: run_measure("gc", i, memory_n) for i in MEMORY_IMPLS if _available(i)
    }
    report["elapsed_s"] = time.time() - started

    with open(os.path.join(RESULTS, f"{stem}.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    markdown = render_markdown(report)
    with open(os.path.join(RESULTS, f"{stem}.md"), "w") as f:
        f.write(markdown)
    print(markdown)
    if not args.no_plots:
        for path in render_plots(report, stem):
            print("wrote", os.path.relpath(path))
    print(f"done in {report['elapsed_s']:.0f} s; results in bench/results/{stem}.*")
    return 0


if __name__ == "__main__":
    sys.exit(main())
