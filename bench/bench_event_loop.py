"""The tickwheel event loop against its base loop, side by side.

Run ``python bench/bench_event_loop.py`` (a few minutes) or ``--quick``
(seconds; smaller sizes, ratios indicative only).  It prints one Markdown
table.  Every time is a median over ``--rounds`` interleaved rounds: each
round times the base loop and the tickwheel loop over it back to back (the
order alternating), a ratio is taken within the round, and the row shows the
median time of each side and the median of the per-round ratios, so a drift
of a shared host's speed does not bias the ratio.  Fresh loops each round;
the garbage collector stays on, as in a real program.

Base loops: asyncio's default loop class and ``uvloop.Loop`` (if installed).
Workloads and goals:

* ``call_later``: ``loop.call_later(delay, cb)`` + ``handle.cancel()``
  through the loop's own methods, 200,000 pairs, delays uniform in 1-30 s:
  >= 4x asyncio's default loop and >= 2x uvloop.
* ``timeout``: ``async with asyncio.timeout(30): await fut`` with ``fut``
  already done, 200,000 times (Python 3.11+): >= 1.3x the base loop.
* ``sleepers``: 1,000,000 tasks pending in ``asyncio.sleep(1..30 s)``: peak
  RSS growth and the time to cancel them all and let them finish, each side
  in a fresh subprocess (a clean peak), reported, not gated.
* ``echo``: a loopback TCP echo (protocols; one 64-byte message in flight,
  20,000 round trips) with no timers at all: the tickwheel loop within 3 %
  of its base.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import tickwheel
from tickwheel import compat_asyncio as tw

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None

Factory = Callable[[], asyncio.AbstractEventLoop]


def _noop() -> None:
    pass


def _bases() -> dict[str, Any]:
    bases: dict[str, Any] = {"asyncio": None}
    if uvloop is not None:
        bases["uvloop"] = uvloop.Loop
    return bases


def _pair(base: Any) -> dict[str, Factory]:
    """The base loop and the tickwheel loop over it."""
    plain: Factory = asyncio.new_event_loop if base is None else base
    return {"base": plain, "tickwheel": lambda: tw.new_event_loop(base)}


def _interleaved(
    body: Callable[[asyncio.AbstractEventLoop], float],
    pair: dict[str, Factory],
    rounds: int,
) -> dict[str, float]:
    """Median seconds per side and median per-round ratio base/tickwheel."""
    times: dict[str, list[float]] = {k: [] for k in pair}
    for r in range(rounds):
        order = list(pair) if r % 2 == 0 else list(reversed(pair))
        for name in order:
            loop = pair[name]()
            try:
                gc.collect()
                times[name].append(body(loop))
            finally:
                loop.close()
    ratios = [b / t for b, t in zip(times["base"], times["tickwheel"])]
    return {
        "base": statistics.median(times["base"]),
        "tickwheel": statistics.median(times["tickwheel"]),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


# -- call_later + cancel ---------------------------------------------------------------


def call_later_body(n: int) -> Callable[[asyncio.AbstractEventLoop], float]:
    rnd = random.Random(20261124)
    delays = [rnd.uniform(1.0, 30.0) for _ in range(n)]

    def body(loop: asyncio.AbstractEventLoop) -> float:
        async def main() -> float:
            call_later = loop.call_later
            t0 = time.perf_counter()
            for d in delays:
                call_later(d, _noop).cancel()
            return time.perf_counter() - t0

        return loop.run_until_complete(main())

    return body


# -- asyncio.timeout around a done future ----------------------------------------------


def timeout_body(n: int) -> Callable[[asyncio.AbstractEventLoop], float]:
    def body(loop: asyncio.AbstractEventLoop) -> float:
        async def main() -> float:
            fut = loop.create_future()
            fut.set_result(None)
            timeout = asyncio.timeout  # type: ignore[attr-defined]
            t0 = time.perf_counter()
            for _ in range(n):
                async with timeout(30):
                    await fut
            return time.perf_counter() - t0

        return loop.run_until_complete(main())

    return body


# -- a loopback echo without timers ----------------------------------------------------


class _EchoServer(asyncio.Protocol):
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


class _EchoClient(asyncio.Protocol):
    def __init__(self, n: int, done: asyncio.Future[float]) -> None:
        self.left = n
        self.done = done
        self.message = b"x" * 64
        self.got = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.t0 = time.perf_counter()
        transport.write(self.message)

    def data_received(self, data: bytes) -> None:
        self.got += len(data)
        if self.got < len(self.message):
            return
        self.got = 0
        self.left -= 1
        if self.left:
            self.transport.write(self.message)
        else:
            self.done.set_result(time.perf_counter() - self.t0)


def echo_body(n: int) -> Callable[[asyncio.AbstractEventLoop], float]:
    def body(loop: asyncio.AbstractEventLoop) -> float:
        async def main() -> float:
            server = await loop.create_server(_EchoServer, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            done: asyncio.Future[float] = loop.create_future()
            transport, _ = await loop.create_connection(
                lambda: _EchoClient(n, done), "127.0.0.1", port
            )
            elapsed = await done
            transport.close()
            server.close()
            await server.wait_closed()
            return elapsed

        return loop.run_until_complete(main())

    return body


# -- a million sleepers (one subprocess per side) --------------------------------------


def _vm_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0  # pragma: no cover (not Linux)


def sleepers_child(base_name: str, side: str, n: int) -> dict[str, float]:
    base = _bases()[base_name]
    loop = _pair(base)[side]()
    rnd = random.Random(20261124)
    delays = [rnd.uniform(1.0, 30.0) for _ in range(n)]

    async def main() -> dict[str, float]:
        await asyncio.sleep(0)
        gc.collect()
        rss0 = _vm_kb("VmRSS")
        t0 = time.perf_counter()
        tasks = [asyncio.ensure_future(asyncio.sleep(d)) for d in delays]
        await asyncio.sleep(0)  # every task has started its sleep
        t_start = time.perf_counter() - t0
        peak = _vm_kb("VmHWM")
        t0 = time.perf_counter()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        t_cancel = time.perf_counter() - t0
        return {
            "start_s": t_start,
            "cancel_s": t_cancel,
            "peak_mb": (peak - rss0) / 1024,
            "bytes_per_sleeper": (peak - rss0) * 1024 / n,
        }

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def bench_sleepers(base_name: str, n: int, rounds: int) -> dict[str, dict[str, float]]:
    runs: dict[str, list[dict[str, float]]] = {"base": [], "tickwheel": []}
    for r in range(rounds):
        order = ["base", "tickwheel"] if r % 2 == 0 else ["tickwheel", "base"]
        for side in order:
            out = subprocess.run(
                [sys.executable, __file__, "--child", base_name, side, str(n)],
                check=True,
                capture_output=True,
                text=True,
            )
            runs[side].append(json.loads(out.stdout))
    return {
        side: {k: statistics.median(x[k] for x in v) for k in v[0]}
        for side, v in runs.items()
    }


# -- report ----------------------------------------------------------------------------


def _ns(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e9:,.0f} ns"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="also write the raw figures here")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        base_name, side, n = args.child
        print(json.dumps(sleepers_child(base_name, side, int(n))))
        return
    n_pairs = 20_000 if args.quick else 200_000
    n_echo = 2_000 if args.quick else 20_000
    n_sleep = 20_000 if args.quick else 1_000_000
    rounds = 3 if args.quick else args.rounds
    sleep_rounds = 1 if args.quick else 3
    raw: dict[str, Any] = {}
    rows = []
    for base_name, base in _bases().items():
        pair = _pair(base)
        r = _interleaved(call_later_body(n_pairs), pair, rounds)
        raw[f"call_later/{base_name}"] = r
        goal = 4.0 if base_name == "asyncio" else 2.0
        rows.append(
            (
                f"{n_pairs:,} `loop.call_later` + `cancel`, {base_name}",
                _ns(r["base"], n_pairs),
                _ns(r["tickwheel"], n_pairs),
                f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})",
                f">= {goal:g}x: {'met' if r['ratio'] >= goal else 'NOT met'}",
            )
        )
        if sys.version_info >= (3, 11):
            r = _interleaved(timeout_body(n_pairs), pair, rounds)
            raw[f"timeout/{base_name}"] = r
            rows.append(
                (
                    f"{n_pairs:,} `async with asyncio.timeout(30): await done`, "
                    f"{base_name}",
                    _ns(r["base"], n_pairs),
                    _ns(r["tickwheel"], n_pairs),
                    f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})",
                    f">= 1.3x: {'met' if r['ratio'] >= 1.3 else 'NOT met'}",
                )
            )
        r = _interleaved(echo_body(n_echo), pair, rounds)
        raw[f"echo/{base_name}"] = r
        slower = 1 / r["ratio"] - 1
        rows.append(
            (
                f"loopback echo, {n_echo:,} round trips, no timers, {base_name}",
                _ns(r["base"], n_echo),
                _ns(r["tickwheel"], n_echo),
                f"{slower * 100:+.1f} % time ({r['ratio_min']:.3f}-"
                f"{r['ratio_max']:.3f}x)",
                f"within 3 %: {'met' if slower <= 0.03 else 'NOT met'}",
            )
        )
        s = bench_sleepers(base_name, n_sleep, sleep_rounds)
        raw[f"sleepers/{base_name}"] = s
        b, t = s["base"], s["tickwheel"]
        rows.append(
            (
                f"{n_sleep:,} tasks in `asyncio.sleep(1..30 s)`: peak RSS, {base_name}",
                f"{b['peak_mb']:,.0f} MB",
                f"{t['peak_mb']:,.0f} MB",
                f"{t['peak_mb'] / b['peak_mb']:.2f}x memory",
                "reported",
            )
        )
        rows.append(
            (
                f"... cancel all {n_sleep:,} and let them finish, {base_name}",
                f"{b['cancel_s'] * 1e3:,.0f} ms",
                f"{t['cancel_s'] * 1e3:,.0f} ms",
                f"{b['cancel_s'] / t['cancel_s']:.2f}x faster",
                "reported",
            )
        )
    commit = subprocess.run(
        ["git", "rev-parse", "--short=10", "HEAD"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    ).stdout.strip()
    print(
        f"Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, tickwheel {tickwheel.__version__} ({commit}), "
        f"uvloop {getattr(uvloop, '__version__', 'absent')}, "
        f"{rounds} interleaved rounds (sleepers: {sleep_rounds}, own processes); "
        "medians\n"
    )
    print("| workload | base loop | tickwheel loop | ratio (min-max) | goal |")
    print("|---|---:|---:|---:|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
