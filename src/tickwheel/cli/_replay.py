"""``tickwheel replay`` and ``tickwheel gen-trace``: the Spark job's command line.

Both need the ``[spark]`` extra and import it only when run (see
:mod:`tickwheel.spark`), so ``tickwheel --help`` and the demo work without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ._common import (
    HELP,
    add_spark_options,
    add_verbose,
    conf_pairs,
    int_list,
    non_negative_int,
    positive_int,
    report,
    spark_import_error,
)

_REPLAY_DESCRIPTION = """\
Replay INPUT, a log of produce and follower-fetch events, through tickwheel's
purgatory in event time on Spark, and write to OUTPUT: outcomes/,
purgatory_size/, rejected/ (Parquet), summary.json, latency_cdf.png,
purgatory_size.png, replay_vs_broker.png (for an input that
import-request-log wrote), and _SUCCESS (the list of what the run wrote).

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
A row that does not parse or fails a check goes to rejected/ with a reason
(and, for a value that is not a number, its text in the column raw).  An
integer column none of whose first 1000 values is a number (ISO times in
ts_ms, say) is refused before Spark starts.

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


def add_spark_parsers(sub: Any) -> argparse.ArgumentParser:
    replay = _add_replay(sub)
    _add_gen_trace(sub)
    return replay


def _add_replay(sub: Any) -> argparse.ArgumentParser:
    replay: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help="replay a produce/fetch event log through the purgatory on Spark",
        description=_REPLAY_DESCRIPTION,
        formatter_class=HELP,
    )
    replay.add_argument("input", nargs="?", help="events (omit with --demo)")
    replay.add_argument("output", nargs="?", help="output directory or URL")
    replay.add_argument(
        "--demo",
        metavar="OUTPUT",
        help="generate a trace into OUTPUT/input (reused if made with the same "
        "--requests and --partitions, else replaced) and replay it "
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
        type=int_list,
        default=None,
        metavar="MS[,MS...]",
        help="comma-separated timeouts to sweep in one pass, e.g. 30000,5000 "
        "(default: each request's own timeout_ms)",
    )
    replay.add_argument(
        "--replica-lag-max-ms",
        type=positive_int,
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
        type=positive_int,
        default=None,
        help="--demo only: requests to generate (default: 200000)",
    )
    replay.add_argument(
        "--partitions",
        type=positive_int,
        default=None,
        help="--demo only: partitions to generate (default: 32)",
    )
    _add_replay_options(replay)
    return replay


def _add_replay_options(replay: argparse.ArgumentParser) -> None:
    """The options about Spark and the console (see :func:`_add_replay`)."""
    add_spark_options(replay)
    replay.add_argument(
        "--no-plots", action="store_true", help="skip the PNG plots (default: plot)"
    )
    add_verbose(replay)


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
        type=positive_int,
        default=200_000,
        help="produce requests to generate (default: 200000)",
    )
    gen.add_argument(
        "--partitions",
        type=positive_int,
        default=32,
        help="topic-partitions to spread them over (default: 32)",
    )
    gen.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    gen.add_argument(
        "--malformed",
        type=non_negative_int,
        default=0,
        help="also write this many malformed rows, to see rejected/ (default: 0)",
    )


def run_gen_trace_command(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> int:
    try:
        from ..spark.trace import write_trace
    except ImportError as exc:
        return spark_import_error(exc)
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


_DEMO_ONLY = ("requests", "partitions")
#: The demo's trace settings, kept beside its Parquet files (Spark and the
#: input checks skip names that start with ``_``).
_DEMO_SETTINGS = "_tickwheel_demo.json"
_DEMO_DEFAULTS = {"requests": 200_000, "partitions": 32}


def _replay_paths(
    replay: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[str, str]:
    import os

    if args.demo:
        if args.input or args.output:
            replay.error("--demo OUTPUT takes no INPUT/OUTPUT arguments")
        for name, default in _DEMO_DEFAULTS.items():
            if getattr(args, name) is None:
                setattr(args, name, default)
        return os.path.join(args.demo, "input"), args.demo
    given = [f"--{n}" for n in _DEMO_ONLY if getattr(args, n) is not None]
    if given:
        replay.error(
            f"{' and '.join(given)} only size the --demo trace; an INPUT is "
            "replayed as it is (drop the option, or use --demo OUTPUT)"
        )
    if not (args.input and args.output):
        replay.print_usage(sys.stderr)
        replay.error("needs INPUT and OUTPUT (or --demo OUTPUT)")
    return args.input, args.output


def _demo_settings(args: argparse.Namespace) -> dict[str, int]:
    return {"requests": args.requests, "partitions": args.partitions, "seed": 1}


def _reusable(input_path: str, settings: dict[str, int]) -> bool:
    """Whether the demo's trace in ``input_path`` was made with ``settings``."""
    import json
    import os

    try:
        with open(os.path.join(input_path, _DEMO_SETTINGS)) as fh:
            return bool(json.load(fh) == settings)
    except (OSError, ValueError):
        return False  # older demo traces have no settings file: regenerate


def _demo_trace(
    args: argparse.Namespace, input_path: str, output: str, overwrite: bool
) -> None:
    """--demo: check OUTPUT, Spark's needs, then write the trace (via staging).

    An earlier demo's trace is reused only if it was made with the same
    --requests and --partitions; otherwise it is replaced.
    """
    import json
    import os
    import shutil

    from ..spark import validate
    from ..spark.commit import staging_path
    from ..spark.trace import write_trace

    validate.check_output(output, overwrite, keep=("input",))
    validate.check_master(args.master)
    validate.check_java()

    settings = _demo_settings(args)
    exists = os.path.exists(input_path)
    if exists and _reusable(input_path, settings):
        print(f"[demo] reusing the trace in {input_path}")
        return
    start = time.perf_counter()
    staging = staging_path(output)
    tmp = os.path.join(staging, "input")
    table = write_trace(tmp, args.requests, args.partitions, seed=1)
    with open(os.path.join(tmp, _DEMO_SETTINGS), "w") as fh:
        json.dump(settings, fh)
    os.makedirs(output, exist_ok=True)
    if exists:  # made with other settings: move it out, then delete it
        old = os.path.join(staging, "input.replaced")
        os.rename(input_path, old)
        os.rename(tmp, input_path)
        shutil.rmtree(old)
    else:
        os.rename(tmp, input_path)
    os.rmdir(staging)  # empty now; the replay stages its results afresh
    what = "replaced the trace (other settings) with" if exists else "wrote"
    print(
        f"[demo] {what} {table.num_rows:,} events ({args.requests:,} requests, "
        f"{args.partitions} partitions) to {input_path} in "
        f"{time.perf_counter() - start:.1f} s"
    )


def run_replay_command(
    replay: argparse.ArgumentParser, args: argparse.Namespace
) -> int:
    input_path, output = _replay_paths(replay, args)
    conf = conf_pairs(replay, args.conf)
    try:
        from ..spark import validate
        from ..spark._console import spark_console
        from ..spark.job import run_replay
    except ImportError as exc:
        return spark_import_error(exc)
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
        report(exc, args.verbose, console)
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
    from ..spark._remote import check_remote, connect_session

    if args.master != replay.get_default("master"):
        replay.error("give --master or --remote, not both")
    check_remote(args.remote, output)
    return connect_session(args.remote, conf)
