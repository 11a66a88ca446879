"""``tickwheel import-request-log``: the command line of the request-log import.

pyspark is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import (
    add_spark_options,
    add_verbose,
    conf_pairs,
    report,
    spark_import_error,
)

_DESCRIPTION = """\
Import LOG, a broker's request log (kafka.request.logger at DEBUG: one
"Completed request:{json}" line per request; plain or .gz files, or
directories of them), into OUTPUT/events, the events table `tickwheel
replay` reads, with OUTPUT/skipped (what was not imported, with a reason),
OUTPUT/summary.json and OUTPUT/_SUCCESS.

Imported: acks=-1 produce partitions that waited in the purgatory (error 0
or 7, REQUEST_TIMED_OUT), one row each, with the broker's remoteTimeMs and
error code; follower fetches (replicaId >= 0), one row per partition.
Counted, not imported: consumer fetches, other APIs, lines of other loggers.
A topic named by id (produce v13+, fetch v13+) stays keyed by its id unless
--topic-ids maps it to its name.

OUTPUT must be new or empty (--overwrite replaces only an earlier import's
own files); it is written beside OUTPUT and moved into place at the end.
Exit codes: 0 done; 2 error (one line on stderr).

Examples:
  tickwheel import-request-log /var/log/kafka/ imported/
  tickwheel import-request-log kafka-request.log* imported/ --topic-ids ids.json
  tickwheel replay imported/ out/
"""


def add_import_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``import-request-log`` parser to ``sub``."""
    cmd: argparse.ArgumentParser = sub.add_parser(
        "import-request-log",
        help="import a broker's request log as the replay's events table (Spark)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("logs", nargs="+", metavar="LOG", help="log files or directories")
    cmd.add_argument("output", metavar="OUTPUT", help="output directory")
    cmd.add_argument(
        "--topic-ids",
        metavar="FILE",
        default=None,
        help='topic id -> name: a JSON object {"<id>": "<name>"} or the output '
        "of kafka-topics.sh --describe (default: ids stay keys)",
    )
    cmd.add_argument(
        "--timezone",
        default="UTC",
        help="time zone of the log's timestamps, the broker's (default: UTC)",
    )
    cmd.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier import's results in OUTPUT (default: refuse "
        "a non-empty OUTPUT)",
    )
    cmd.add_argument(
        "--master", default="local[*]", help="Spark master (default: local[*])"
    )
    add_spark_options(cmd)
    add_verbose(cmd)
    return cmd


def run_import_command(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> int:
    """Run the import; one line and exit 2 on any error."""
    conf = conf_pairs(parser, args.conf)
    try:
        from ..spark._console import spark_console
        from ..spark.request_log import run_import
    except ImportError as exc:
        return spark_import_error(exc)
    console = None
    try:
        console = spark_console(args.verbose, conf)
        code = run_import(
            args.logs,
            args.output,
            master=args.master,
            topic_ids=args.topic_ids,
            timezone=args.timezone,
            overwrite=args.overwrite,
            console=console,
            conf=conf,
            ui=args.ui,
        )
    except KeyboardInterrupt:
        print(
            "tickwheel import-request-log: interrupted; OUTPUT is unchanged",
            file=sys.stderr,
        )
        return 130
    except Exception as exc:  # every error is one line (--verbose: traceback)
        report(exc, args.verbose, console, "import-request-log")
        return 2
    if console is not None:
        console.close(keep_log=False)
    return code
