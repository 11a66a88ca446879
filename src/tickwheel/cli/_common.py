"""What the commands share: one-line errors, argument types, error reports.

Every command reports a bad argument as one line, ``tickwheel <command>:
<what>`` with exit 2, and an error of the job as one line too (``--verbose``
adds the traceback); the helpers here are that contract, so the commands
import them and nothing imports the commands.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``tickwheel replay: <what>; see --help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


HELP = argparse.RawDescriptionHelpFormatter


def add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show Spark's own log and, on an error, the traceback (default: off)",
    )


def add_spark_options(parser: argparse.ArgumentParser) -> None:
    """--ui and --conf, which every command that starts Spark takes."""
    parser.add_argument(
        "--ui", action="store_true", help="start the Spark web UI (default: off)"
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable), e.g. spark.driver.memory=4g "
        "(default: none)",
    )


def conf_pairs(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


def int_list(text: str) -> list[int]:
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


def positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def non_negative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def spark_import_error(exc: ImportError) -> int:
    print(
        f"tickwheel: this command needs the [spark] extra ({exc}); install it "
        "from tickwheel's checkout with: pip install '.[spark]'",
        file=sys.stderr,
    )
    return 2


def report(
    exc: Exception, verbose: bool, console: Any, command: str = "replay"
) -> None:
    """One line for an error; the traceback only with --verbose."""
    from ..spark.validate import ReplayUsageError

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
