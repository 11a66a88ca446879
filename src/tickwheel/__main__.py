"""Command line: ``tickwheel demo``, ``tickwheel replay``, ``tickwheel gen-trace``.

``replay`` and ``gen-trace`` need the ``[spark]`` extra and import it only
when run (see :mod:`tickwheel.spark`).

The demo schedules a few thousand timers on a real SystemTimer, cancels a
share of them at random, waits for the rest, and prints what happened: how
many fired and were cancelled, whether any was lost, fired twice or fired
early, and the lateness distribution.  It exits non-zero if any task was
lost, duplicated or early, so it doubles as a smoke test of an install.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from . import USE_EXTENSIONS, __version__
from .timer import SystemTimer


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def run_demo(timers: int, max_delay_ms: int, cancel_share: float, seed: int) -> int:
    """Run the demo and print a summary; return the process exit code."""
    rnd = random.Random(seed)
    lock = threading.Lock()
    fired: dict[int, int] = {}
    lateness_ms: list[float] = []
    early = 0
    all_done = threading.Event()
    expected = [0]

    def fire(i: int, deadline_ns: int) -> None:
        nonlocal early
        late = time.monotonic_ns() - deadline_ns
        with lock:
            fired[i] = fired.get(i, 0) + 1
            lateness_ms.append(late / 1e6)
            if late < 0:
                early += 1
            if len(lateness_ms) == expected[0]:
                all_done.set()

    start = time.perf_counter()
    with SystemTimer(name="tickwheel-demo") as timer:
        tasks = []
        for i in range(timers):
            delay = rnd.randint(1, max_delay_ms)
            # The deadline is taken before schedule(), so it is a lower bound
            # of the timer's own: a negative lateness would be a real bug.
            deadline_ns = time.monotonic_ns() + delay * 1_000_000
            tasks.append(timer.schedule(delay, fire, i, deadline_ns))
        schedule_s = time.perf_counter() - start
        cancelled = {
            i for i, t in enumerate(tasks) if rnd.random() < cancel_share and t.cancel()
        }
        with lock:
            expected[0] = timers - len(cancelled)
            if len(lateness_ms) == expected[0]:
                all_done.set()
        finished = all_done.wait(max_delay_ms / 1000 + 30)
        pending = len(timer)
    elapsed = time.perf_counter() - start

    lost = sum(1 for i in range(timers) if i not in cancelled and i not in fired)
    duplicates = sum(1 for n in fired.values() if n > 1)
    ran_cancelled = sum(1 for i in cancelled if i in fired)
    late = sorted(lateness_ms)
    print(
        f"tickwheel {__version__} demo "
        f"({'accelerated' if USE_EXTENSIONS else 'pure Python'})"
    )
    print(
        f"  timers scheduled     {timers:>10,}   "
        f"({schedule_s * 1e9 / timers:,.0f} ns each)"
    )
    print(f"  cancelled            {len(cancelled):>10,}")
    print(f"  fired                {len(fired):>10,}")
    print(f"  lost / duplicated    {lost:>10,} / {duplicates:,}")
    print(f"  cancelled but ran    {ran_cancelled:>10,}")
    print(f"  fired early          {early:>10,}")
    if late:
        print(
            "  lateness ms          "
            f"p50 {_percentile(late, 0.50):.3f}  p99 {_percentile(late, 0.99):.3f}  "
            f"max {late[-1]:.3f}  mean {statistics.fmean(late):.3f}"
        )
    print(f"  pending at close     {pending:>10,}")
    print(f"  wall time            {elapsed:>10.2f} s")
    ok = finished and not lost and not duplicates and not early and not ran_cancelled
    print("  result               " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tickwheel`` command."""
    parser = argparse.ArgumentParser(
        prog="tickwheel", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--version", action="version", version=f"tickwheel {__version__}"
    )
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="schedule timers on a SystemTimer and report")
    demo.add_argument("--timers", type=int, default=5_000, help="how many timers")
    demo.add_argument(
        "--max-delay-ms", type=int, default=1_000, help="delays are 1..this"
    )
    demo.add_argument("--cancel-share", type=float, default=0.2, help="share to cancel")
    demo.add_argument("--seed", type=int, default=1)
    _add_spark_commands(sub)
    args = parser.parse_args(argv)
    if args.command == "replay":
        return _run_replay(parser, args)
    if args.command == "gen-trace":
        return _run_gen_trace(parser, args)
    if args.command in (None, "demo"):
        if args.command is None:
            args = demo.parse_args([])
        if args.timers < 1 or args.max_delay_ms < 1 or not 0 <= args.cancel_share <= 1:
            parser.error(
                "--timers and --max-delay-ms must be >= 1, --cancel-share in [0, 1]"
            )
        return run_demo(args.timers, args.max_delay_ms, args.cancel_share, args.seed)
    parser.error(f"unknown command {args.command!r}")
    return 2


def _add_spark_commands(sub: Any) -> None:
    replay = sub.add_parser(
        "replay",
        help="replay a produce/fetch event log through the purgatory on Spark",
        description="Replay INPUT (events: Parquet, CSV or JSON lines) in event time "
        "and write outcomes/, purgatory_size/, rejected/, summary.json and plots to "
        "OUTPUT.  Exit code 0: no row rejected; 1: some rows rejected; 2: error.",
    )
    replay.add_argument("input", nargs="?", help="events (omit with --demo)")
    replay.add_argument("output", nargs="?", help="output directory")
    replay.add_argument(
        "--demo",
        metavar="OUTPUT",
        help="generate a trace into OUTPUT/input and replay it into OUTPUT",
    )
    replay.add_argument("--master", default="local[*]", help="Spark master URL")
    replay.add_argument(
        "--timeout-ms",
        type=_int_list,
        default=None,
        help="comma-separated timeouts to sweep in one pass "
        "(default: each request's own timeout_ms)",
    )
    replay.add_argument(
        "--replica-lag-max-ms",
        type=int,
        default=None,
        help="ISR dynamics: a follower behind the leader this long "
        "leaves the ISR until it catches up (default: fixed ISR)",
    )
    replay.add_argument(
        "--format",
        choices=["parquet", "csv", "json"],
        default=None,
        help="input format (default: from the path)",
    )
    replay.add_argument(
        "--requests", type=int, default=200_000, help="--demo: requests to generate"
    )
    replay.add_argument(
        "--partitions", type=int, default=32, help="--demo: partitions to generate"
    )
    replay.add_argument("--ui", action="store_true", help="start the Spark web UI")
    replay.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable), e.g. spark.archives=env.tar.gz#environment",
    )
    replay.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    gen = sub.add_parser(
        "gen-trace",
        help="write a synthetic produce/fetch trace (Parquet)",
        description="Poisson produce arrivals per partition, followers fetching "
        "with log-normal delays, a few slow followers with stalls.",
    )
    gen.add_argument("output", help="output directory (Parquet dataset)")
    gen.add_argument("--requests", type=int, required=True)
    gen.add_argument("--partitions", type=int, required=True)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--malformed",
        type=int,
        default=0,
        help="also write this many malformed rows (to see rejected/)",
    )


def _conf_pairs(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError(f"expected at least one integer, got {text!r}")
    return values


def _spark_import_error(parser: argparse.ArgumentParser, exc: ImportError) -> int:
    print(
        f"tickwheel: this command needs the [spark] extra ({exc}); "
        "install it with: pip install 'tickwheel[spark]'",
        file=sys.stderr,
    )
    return 2


def _run_gen_trace(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.requests < 1 or args.partitions < 1 or args.malformed < 0:
        parser.error("--requests and --partitions must be >= 1, --malformed >= 0")
    try:
        from .spark.trace import write_trace
    except ImportError as exc:
        return _spark_import_error(parser, exc)
    start = time.perf_counter()
    try:
        table = write_trace(
            args.output,
            args.requests,
            args.partitions,
            seed=args.seed,
            malformed=args.malformed,
        )
    except (FileExistsError, ValueError) as exc:
        print(f"tickwheel gen-trace: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {table.num_rows:,} events ({args.requests:,} requests, "
        f"{args.partitions} partitions) to {args.output} in "
        f"{time.perf_counter() - start:.1f} s"
    )
    return 0


def _run_replay(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import os

    if args.demo:
        if args.input or args.output:
            parser.error("replay --demo OUTPUT takes no INPUT/OUTPUT arguments")
        output = args.demo
        input_path = os.path.join(output, "input")
    else:
        if not (args.input and args.output):
            parser.error("replay needs INPUT and OUTPUT (or --demo OUTPUT)")
        input_path, output = args.input, args.output
    try:
        from .spark.job import run_replay
        from .spark.trace import write_trace
    except ImportError as exc:
        return _spark_import_error(parser, exc)
    try:
        if args.demo:
            if os.path.exists(input_path):
                print(f"[demo] reusing the trace in {input_path}")
            else:
                start = time.perf_counter()
                table = write_trace(input_path, args.requests, args.partitions, seed=1)
                print(
                    f"[demo] wrote {table.num_rows:,} events "
                    f"({args.requests:,} requests, "
                    f"{args.partitions} partitions) to {input_path} in "
                    f"{time.perf_counter() - start:.1f} s"
                )
        return run_replay(
            input_path,
            output,
            master=args.master,
            timeout_ms=args.timeout_ms,
            replica_lag_max_ms=args.replica_lag_max_ms,
            fmt=args.format,
            ui=args.ui,
            conf=_conf_pairs(parser, args.conf),
            plots=not args.no_plots,
        )
    except (FileNotFoundError, ValueError, TypeError) as exc:
        print(f"tickwheel replay: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
