"""Instructions per message of bench_server.py's servers, by callgrind.

The noise-free counterpart of ``bench_server.py`` for a shared host: the
server runs under ``valgrind --tool=callgrind`` twice, stopping after M and
after 2M messages (``server_load.py serve ... --exit-after``), with the
same load; the difference of the two instruction totals over M is the cost
of one message (start-up, imports and connection set-up cancel out)::

    python bench/callgrind_server.py                  # idle and http, all loops
    python bench/callgrind_server.py --m 1000 idle    # one workload
    python bench/callgrind_server.py --conns 400 idle  # a saturated server

``idle``: 20 connections, one message every 10-50 ms each (the server is
far from saturated even under valgrind, so each message is about one loop
iteration; ``--conns 400`` saturates it, as 10,000 do bench_server.py's);
``http``: ``wrk`` with 8 keep-alive connections.  Keep the callgrind files
(``--keep DIR``) to read where the instructions go with ``callgrind_annotate``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_server import LOAD, LOAD_CPU, LOOPS, SERVER_CPU, check_names, variants

WORKLOADS = ("idle", "http")


def instructions(path: Path) -> int:
    m = re.search(r"^(?:summary|totals):\s+(\d+)", path.read_text(), re.M)
    assert m is not None, path
    return int(m[1])


def one_run(
    workload: str, loop: str, mode: str, m: int, out: Path, conns: int = 20
) -> int:
    """Total instructions of a server that stops after ``m`` messages."""
    cmd = SERVER_CPU + [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        *LOAD, "serve", workload, loop, "--mode", mode, "--exit-after", str(m),
    ]  # fmt: skip
    server = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert server.stdout is not None
    port = server.stdout.readline().split()[1]
    if workload == "idle":
        load = subprocess.Popen(
            LOAD_CPU + LOAD + ["client", "idle", port, str(conns)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert load.stdin is not None and load.stdout is not None
        load.stdout.readline()  # READY
        load.stdin.write("go\n")
        load.stdin.flush()
    else:
        load = subprocess.Popen(
            LOAD_CPU + ["wrk", "-t1", "-c8", "-d600s", f"http://127.0.0.1:{port}/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        server.wait(timeout=900)
    finally:
        load.kill()
        load.wait()
    return instructions(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workloads", nargs="*", default=list(WORKLOADS),
                   help="idle, http (default: both)")  # fmt: skip
    p.add_argument("--m", type=int, default=2000, help="messages of the short run")
    p.add_argument("--loops", default=",".join(LOOPS))
    p.add_argument("--keep", type=Path, help="keep the callgrind files here")
    p.add_argument("--conns", type=int, default=20, help="idle: connections "
                   "(400 saturate the server under valgrind)")  # fmt: skip
    opts = p.parse_args(argv)
    if opts.m < 1:
        p.error(f"--m must be >= 1, got {opts.m}")
    if not 1 <= opts.conns <= 15_000:
        p.error(f"--conns must be in 1..15000 (file descriptors), got {opts.conns}")
    check_names(p, "workload", opts.workloads, WORKLOADS)
    check_names(p, "--loops", opts.loops.split(","), LOOPS)
    if opts.keep is not None and opts.keep.exists() and not opts.keep.is_dir():
        p.error(f"--keep: {opts.keep} exists and is not a directory")
    for tool in ("valgrind", "wrk"):
        if shutil.which(tool) is None:
            print(f"callgrind_server.py: {tool} not found (apt-get install -y "
                  f"{tool})", file=sys.stderr)  # fmt: skip
            return 2
    tmp = tempfile.TemporaryDirectory()
    keep = opts.keep or Path(tmp.name)
    keep.mkdir(parents=True, exist_ok=True)
    print("| workload | loop | timer | instructions per message |")
    print("|---|---|---|---:|")
    for w, loop, mode in variants(opts.workloads, opts.loops.split(",")):
        t0 = time.perf_counter()
        base = f"{w}-{loop}-{mode}"
        short = one_run(w, loop, mode, opts.m, keep / f"{base}-m.out", opts.conns)
        long = one_run(w, loop, mode, 2 * opts.m, keep / f"{base}-2m.out", opts.conns)
        per = (long - short) / opts.m
        print(f"| {w} | {loop} | {mode} | {per:,.0f} |", flush=True)
        print(f"  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
