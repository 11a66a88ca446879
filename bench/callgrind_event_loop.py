"""Instructions per operation of the tickwheel event loop and its base, by callgrind.

Noise-free counterpart of ``bench_event_loop.py`` for a shared host: each
workload runs under ``valgrind --tool=callgrind`` twice, with N and 2N
operations, and the difference of the two instruction totals divided by N is
the cost of one operation (interpreter start-up, imports and loop creation
cancel out)::

    python bench/callgrind_event_loop.py              # table of all rows
    python bench/callgrind_event_loop.py --n 20000 call_later timeout

A single run (what the table runs under valgrind)::

    python bench/callgrind_event_loop.py --one timeout asyncio tickwheel 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
from typing import Any

from tickwheel import compat_asyncio as tw

WORKLOADS = ("call_later", "call_at", "timeout", "sleep0", "echo")


def _noop() -> None:
    pass


def one(workload: str, base_name: str, side: str, n: int) -> None:
    base: Any = None
    if base_name == "uvloop":
        import uvloop

        base = uvloop.Loop
    if side == "tickwheel":
        loop = tw.new_event_loop(base)
    else:
        loop = asyncio.new_event_loop() if base is None else base()

    if workload == "echo":  # N loopback round trips, no timers (see bench_event_loop)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_event_loop import echo_body

        try:
            echo_body(n)(loop)
        finally:
            loop.close()
        return

    async def main() -> None:
        fut = loop.create_future()
        fut.set_result(None)
        if workload == "call_later":
            call_later = loop.call_later
            for i in range(n):
                call_later(1.0 + (i % 29), _noop).cancel()
        elif workload == "call_at":
            call_at = loop.call_at
            now = loop.time()
            for i in range(n):
                call_at(now + 1.0 + (i % 29), _noop).cancel()
        elif workload == "timeout":
            timeout = asyncio.timeout  # type: ignore[attr-defined]
            for _ in range(n):
                async with timeout(30):
                    await fut
        else:  # sleep0: a loop iteration with no timers (echo's hot path)
            for _ in range(n):
                await asyncio.sleep(0)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def instructions(workload: str, base: str, side: str, n: int) -> int:
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--one",
        workload,
        base,
        side,
        str(n),
    ]
    err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    match = re.search(r"Collected : (\d+)", err)
    assert match, err
    return int(match.group(1))


def per_op(workload: str, base: str, side: str, n: int) -> float:
    return (
        instructions(workload, base, side, 2 * n)
        - instructions(workload, base, side, n)
    ) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--bases", default="asyncio,uvloop")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = parser.parse_args()
    if args.one:
        workload, base, side, n = args.one
        one(workload, base, side, int(n))
        return
    print(f"Python {sys.version.split()[0]}; instructions per operation, N={args.n}\n")
    print("| workload | base loop | tickwheel loop | ratio |")
    print("|---|---:|---:|---:|")
    for workload in args.workloads:
        for base in args.bases.split(","):
            b = per_op(workload, base, "base", args.n)
            t = per_op(workload, base, "tickwheel", args.n)
            print(f"| {workload}, {base} | {b:,.0f} | {t:,.0f} | {b / t:.2f}x |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
