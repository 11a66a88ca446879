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
from typing import Any, NoReturn

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


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``tickwheel replay: <what>; see --help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


_HELP = argparse.RawDescriptionHelpFormatter


def build_parsers() -> dict[str, argparse.ArgumentParser]:
    """The parsers of ``tickwheel`` (key ``""``) and of each command."""
    parser = _Parser(
        prog="tickwheel",
        description="tickwheel: Kafka's hierarchical timing wheel and purgatory. "
        "Commands: demo (a SystemTimer smoke run), replay (event-time replay "
        "of produce logs on Spark), gen-trace (a synthetic produce log), "
        "import-request-log (a broker's request log as replay input).",
    )
    parser.add_argument(
        "--version", action="version", version=f"tickwheel {__version__}"
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    demo = sub.add_parser(
        "demo",
        help="schedule timers on a SystemTimer and report (the default command)",
        description="Schedule timers on a real SystemTimer, cancel some, and "
        "report lateness and anything lost, duplicated or early (exit 1 if any).",
    )
    demo.add_argument(
        "--timers", type=int, default=5_000, help="how many timers (default: 5000)"
    )
    demo.add_argument(
        "--max-delay-ms",
        type=int,
        default=1_000,
        help="delays are drawn from 1..this (default: 1000)",
    )
    demo.add_argument(
        "--cancel-share",
        type=float,
        default=0.2,
        help="share of the timers to cancel (default: 0.2)",
    )
    demo.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    replay = _add_spark_commands(sub)
    from ._import_cli import add_import_parser

    return {
        "": parser,
        "demo": demo,
        "replay": replay,
        "gen-trace": sub.choices["gen-trace"],
        "import-request-log": add_import_parser(sub),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tickwheel`` command."""
    parsers = build_parsers()
    parser, demo, replay = parsers[""], parsers["demo"], parsers["replay"]
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Reported by the command's own parser: `tickwheel replay: ...`.
        parsers.get(args.command or "", parser).error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    if args.command == "replay":
        return _run_replay(replay, args)
    if args.command == "gen-trace":
        return _run_gen_trace(parser, args)
    if args.command == "import-request-log":
        from ._import_cli import run_import_command

        return run_import_command(parsers["import-request-log"], args)
    if args.command in (None, "demo"):
        if args.command is None:
            args = demo.parse_args([])
        if args.timers < 1 or args.max_delay_ms < 1 or not 0 <= args.cancel_share <= 1:
            demo.error(
                "--timers and --max-delay-ms must be >= 1, --cancel-share in [0, 1]"
            )
        return run_demo(args.timers, args.max_delay_ms, args.cancel_share, args.seed)
    parser.error(f"unknown command {args.command!r}")
    return 2


_REPLAY_DESCRIPTION = """\
Replay INPUT, a log of produce and follower-fetch events, through tickwheel's
purgatory in event time on Spark, and write to OUTPUT: outcomes/,
purgatory_size/, rejected/ (Parquet), summary.json, latency_cdf.png,
purgatory_size.png, and _SUCCESS (the list of what the run wrote).

INPUT: Parquet (a file or a directory), CSV with a header, or JSON lines;
the format comes from the suffix or --format.  Columns are matched by name
(any order; extra columns are ignored):
  ts_ms            int64   event time (ms)
  partition        string  topic-partition
  kind             string  produce or fetch
  request_id       int64   produce: unique id (empty for fetch)
  required_offset  int64   produce: leader's log end offset after the append
  timeout_ms       int64   produce: the request's timeout
  replica          int32   fetch: follower id (empty for produce)
  fetch_offset     int64   fetch: follower's log end offset after the fetch
A row that does not parse or fails a check goes to rejected/ with a reason.

OUTPUT must be new or empty; --overwrite replaces only what an earlier run
listed in its _SUCCESS.  Results are written beside OUTPUT first and moved
into place at the end, so a killed run leaves OUTPUT as it was.

Exit codes: 0 done, no row rejected; 1 done, some rows rejected (see
rejected/); 2 error (one line on stderr; --verbose for the details).

Examples:
  tickwheel replay --demo out/
  tickwheel replay events/ out/ --timeout-ms 30000,5000,1000
  tickwheel replay events.csv out/ --replica-lag-max-ms 10000
"""


def _add_spark_commands(sub: Any) -> argparse.ArgumentParser:
    replay = _add_replay(sub)
    _add_gen_trace(sub)
    return replay


def _add_replay(sub: Any) -> argparse.ArgumentParser:
    replay: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help="replay a produce/fetch event log through the purgatory on Spark",
        description=_REPLAY_DESCRIPTION,
        formatter_class=_HELP,
    )
    replay.add_argument("input", nargs="?", help="events (omit with --demo)")
    replay.add_argument("output", nargs="?", help="output directory or URL")
    replay.add_argument(
        "--demo",
        metavar="OUTPUT",
        help="generate a trace into OUTPUT/input (reused if there) and replay it "
        "into OUTPUT; run again, it replaces its own earlier results "
        "(default: replay INPUT into OUTPUT)",
    )
    replay.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier run's results in OUTPUT (only the files its "
        "_SUCCESS lists; other files are kept) (default: refuse a non-empty OUTPUT)",
    )
    replay.add_argument(
        "--master",
        default="local[*]",
        help="Spark master: local[N], spark://HOST:PORT, yarn, k8s://... "
        "(default: local[*])",
    )
    replay.add_argument(
        "--remote",
        default=None,
        metavar="sc://HOST:PORT",
        help="run on a Spark Connect server instead of starting Spark here; "
        "OUTPUT must be a local path the server writes too (default: --master)",
    )
    replay.add_argument(
        "--timeout-ms",
        type=_int_list,
        default=None,
        metavar="MS[,MS...]",
        help="comma-separated timeouts to sweep in one pass, e.g. 30000,5000 "
        "(default: each request's own timeout_ms)",
    )
    replay.add_argument(
        "--replica-lag-max-ms",
        type=_positive_int,
        default=None,
        metavar="MS",
        help="ISR dynamics: a follower behind the leader this long leaves the "
        "ISR until it catches up (default: fixed ISR)",
    )
    replay.add_argument(
        "--format",
        choices=["parquet", "csv", "json"],
        default=None,
        help="input format (default: from the suffix; a directory: its files' "
        "suffix, else Parquet)",
    )
    replay.add_argument(
        "--requests",
        type=_positive_int,
        default=200_000,
        help="--demo: requests to generate (default: 200000)",
    )
    replay.add_argument(
        "--partitions",
        type=_positive_int,
        default=32,
        help="--demo: partitions to generate (default: 32)",
    )
    _add_replay_options(replay)
    return replay


def _add_replay_options(replay: argparse.ArgumentParser) -> None:
    """The options about Spark and the console (see :func:`_add_replay`)."""
    replay.add_argument(
        "--ui", action="store_true", help="start the Spark web UI (default: off)"
    )
    replay.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable), e.g. spark.driver.memory=4g "
        "(default: none)",
    )
    replay.add_argument(
        "--no-plots", action="store_true", help="skip the PNG plots (default: plot)"
    )
    _add_verbose(replay)


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show Spark's own log and, on an error, the traceback (default: off)",
    )


def _add_gen_trace(sub: Any) -> None:
    gen = sub.add_parser(
        "gen-trace",
        help="write a synthetic produce/fetch trace (Parquet)",
        description="Write a synthetic produce/fetch trace as a Parquet dataset: "
        "Poisson produce arrivals per partition, followers fetching with "
        "log-normal delays, a few slow followers with stalls.  OUTPUT must be "
        "new or empty.",
    )
    gen.add_argument("output", help="output directory (Parquet dataset)")
    gen.add_argument(
        "--requests",
        type=_positive_int,
        default=200_000,
        help="produce requests to generate (default: 200000)",
    )
    gen.add_argument(
        "--partitions",
        type=_positive_int,
        default=32,
        help="topic-partitions to spread them over (default: 32)",
    )
    gen.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    gen.add_argument(
        "--malformed",
        type=_non_negative_int,
        default=0,
        help="also write this many malformed rows, to see rejected/ (default: 0)",
    )


def _conf_pairs(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def _int_list(text: str) -> list[int]:
    """``30000,5000``: non-negative ints, no empty or repeated items."""
    parts = [part.strip() for part in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated whole milliseconds like 30000,5000, got {text!r}"
        )
    values = [int(p) for p in parts]
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"a timeout appears twice in {text!r}")
    return values


def _positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _non_negative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def _spark_import_error(exc: ImportError) -> int:
    print(
        f"tickwheel: this command needs the [spark] extra ({exc}); "
        "install it with: pip install 'tickwheel[spark]'",
        file=sys.stderr,
    )
    return 2


def _run_gen_trace(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        from .spark.trace import write_trace
    except ImportError as exc:
        return _spark_import_error(exc)
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


def _replay_paths(
    replay: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[str, str]:
    import os

    if args.demo:
        if args.input or args.output:
            replay.error("--demo OUTPUT takes no INPUT/OUTPUT arguments")
        return os.path.join(args.demo, "input"), args.demo
    if not (args.input and args.output):
        replay.print_usage(sys.stderr)
        replay.error("needs INPUT and OUTPUT (or --demo OUTPUT)")
    return args.input, args.output


def _demo_trace(
    args: argparse.Namespace, input_path: str, output: str, overwrite: bool
) -> None:
    """--demo: check OUTPUT, Spark's needs, then write the trace (via staging)."""
    import os

    from .spark import validate
    from .spark.commit import staging_path
    from .spark.trace import write_trace

    validate.check_output(output, overwrite, keep=("input",))
    validate.check_master(args.master)
    validate.check_java()

    if os.path.exists(input_path):
        print(f"[demo] reusing the trace in {input_path}")
        return
    start = time.perf_counter()
    tmp = os.path.join(staging_path(output), "input")
    table = write_trace(tmp, args.requests, args.partitions, seed=1)
    os.makedirs(output, exist_ok=True)
    os.rename(tmp, input_path)
    print(
        f"[demo] wrote {table.num_rows:,} events ({args.requests:,} requests, "
        f"{args.partitions} partitions) to {input_path} in "
        f"{time.perf_counter() - start:.1f} s"
    )


def _run_replay(replay: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    input_path, output = _replay_paths(replay, args)
    conf = _conf_pairs(replay, args.conf)
    try:
        from .spark import validate
        from .spark._console import spark_console
        from .spark.job import run_replay
    except ImportError as exc:
        return _spark_import_error(exc)
    keep = ("input",) if args.demo else ()
    overwrite = args.overwrite or bool(
        args.demo and validate.read_manifest(output) is not None
    )
    console = None
    session = None
    try:
        if args.remote:
            session = _connect(replay, args, output, conf)
        if args.demo:
            _demo_trace(args, input_path, output, overwrite)
        console = spark_console(args.verbose, conf, args.remote or args.master)
        code = run_replay(
            input_path,
            output,
            master=args.remote or args.master,
            spark=session,
            timeout_ms=args.timeout_ms,
            replica_lag_max_ms=args.replica_lag_max_ms,
            fmt=args.format,
            ui=args.ui,
            conf=conf,
            plots=not args.no_plots,
            overwrite=overwrite,
            keep=keep,
            console=console,
        )
    except KeyboardInterrupt:
        print("tickwheel replay: interrupted; OUTPUT is unchanged", file=sys.stderr)
        return 130
    except Exception as exc:  # every error is one line (--verbose: traceback)
        _report(exc, args.verbose, console)
        return 2
    finally:
        if session is not None:
            session.stop()
    if console is not None:
        console.close(keep_log=False)
    return code


def _connect(
    replay: argparse.ArgumentParser,
    args: argparse.Namespace,
    output: str,
    conf: dict[str, str],
) -> Any:
    """--remote: check the URL and OUTPUT, then open the Spark Connect session."""
    from .spark._remote import check_remote, connect_session

    if args.master != replay.get_default("master"):
        replay.error("give --master or --remote, not both")
    check_remote(args.remote, output)
    return connect_session(args.remote, conf)


def _report(
    exc: Exception, verbose: bool, console: Any, command: str = "replay"
) -> None:
    """One line for an error; the traceback only with --verbose."""
    from .spark.validate import ReplayUsageError

    if verbose:
        import traceback

        traceback.print_exc()
    log = _spark_log(console)
    if isinstance(exc, (ReplayUsageError, ValueError, TypeError, FileExistsError)):
        message = str(exc)
    else:
        gist = _first_line(exc)
        cause = _log_error(log) if log else None
        if "JAVA_GATEWAY_EXITED" in gist:
            message = f"Spark did not start: {cause or gist}"
        else:
            message = f"the job failed: {gist}"
        if log:
            message += f" (Spark's log: {log})"
        elif not verbose:
            message += " (--verbose shows the traceback)"
    if console is not None:
        console.close(keep_log=bool(log))
    print(f"tickwheel {command}: {message}", file=sys.stderr)


def _spark_log(console: Any) -> str | None:
    """The Spark log of this run if it holds anything."""
    import os

    log = getattr(console, "log_path", None)
    return log if log and os.path.exists(log) and os.path.getsize(log) else None


def _log_error(log: str) -> str | None:
    """The first line of Spark's log that names an error (what the JVM said)."""
    import re

    with open(log, errors="replace") as fh:
        for line in fh:
            if re.search(r"Exception|Error|Invalid|invalid", line):
                return line.strip()[:300]
    return None


def _first_line(exc: BaseException) -> str:
    """The gist of an exception; for a Java error, the Java exception's own line."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    return first if len(first) <= 300 else first[:297] + "..."


if __name__ == "__main__":
    sys.exit(main())
