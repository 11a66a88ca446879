"""The command line: ``tickwheel`` demo, replay, gen-trace, import-request-log.

One home for every command, layered downward: this module builds the parsers
and dispatches; each command lives in a module of its own (``_demo``,
``_replay`` for replay and gen-trace, ``_import``), and all of them share
``_common`` (one-line errors, argument types, the error report).  No command
module imports another, and nothing here imports ``tickwheel.spark`` until a
Spark command runs, so ``tickwheel --help`` and the demo need no extra.
``python -m tickwheel`` (``tickwheel/__main__.py``) and the ``tickwheel``
script both call :func:`main`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .. import __version__
from ._common import Parser
from ._demo import add_demo_parser, run_demo, run_demo_command
from ._import import add_import_parser, run_import_command
from ._replay import add_spark_parsers, run_gen_trace_command, run_replay_command

__all__ = ["build_parsers", "main", "run_demo"]


def build_parsers() -> dict[str, argparse.ArgumentParser]:
    """The parsers of ``tickwheel`` (key ``""``) and of each command."""
    parser = Parser(
        prog="tickwheel",
        description="tickwheel: Kafka's hierarchical timing wheel and purgatory. "
        "Commands: demo (a SystemTimer smoke run), replay (event-time replay "
        "of produce logs on Spark), gen-trace (a synthetic produce log), "
        "import-request-log (a broker's request log as replay input).",
    )
    parser.add_argument(
        "--version", action="version", version=f"tickwheel {__version__}"
    )
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    demo = add_demo_parser(sub)
    replay = add_spark_parsers(sub)
    return {
        "": parser,
        "demo": demo,
        "replay": replay,
        "gen-trace": sub.choices["gen-trace"],
        "import-request-log": add_import_parser(sub),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tickwheel`` command; returns the exit code."""
    parsers = build_parsers()
    parser = parsers[""]
    args, extra = parser.parse_known_args(argv)
    if extra:
        # Reported by the command's own parser: `tickwheel replay: ...`.
        parsers.get(args.command or "", parser).error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    if args.command == "replay":
        return run_replay_command(parsers["replay"], args)
    if args.command == "gen-trace":
        return run_gen_trace_command(parser, args)
    if args.command == "import-request-log":
        return run_import_command(parsers["import-request-log"], args)
    if args.command in (None, "demo"):
        if args.command is None:
            args = parsers["demo"].parse_args([])
        return run_demo_command(parsers["demo"], args)
    parser.error(f"unknown command {args.command!r}")
    return 2
