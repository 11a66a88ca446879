"""The processes of bench_server.py: a server on one of four loops, and clients.

``python bench/server_load.py serve WORKLOAD LOOP [--option value ...]``
starts a server and prints ``PORTS <data port> <control port>``; the
orchestrator (bench_server.py) then sends lines to the control port:
``mark`` starts the measured window (CPU time, messages, GC pauses from
zero), ``stats`` answers one JSON line about the window (and then times
one full collection), ``final`` closes
every connection and answers the timer counts.  ``python bench/server_load.py
client WORKLOAD PORT COUNT [...]`` opens COUNT connections, prints ``READY``,
and then obeys ``go`` / ``stop`` lines on stdin; it prints one JSON line
(its round-trip times) when done.  Clients always run on uvloop, whatever
the server's loop, so only the server changes between loops.

The workloads and what each number means: bench/README.md, "A real server".
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import uvloop

from tickwheel import compat_asyncio as tw

LOOPS = ("asyncio", "tickwheel", "uvloop", "tickwheel-uvloop")
MESSAGE = b"x" * 31 + b"\n"  # workload 3's small message (one line)


def run(loop: str, main: Coroutine[Any, Any, Any]) -> Any:
    """Run ``main`` on the named loop, as a user switches loops: one line."""
    if loop == "asyncio":
        return asyncio.run(main)
    if loop == "tickwheel":
        return tw.run(main)
    if loop == "uvloop":
        return uvloop.run(main)
    if loop == "tickwheel-uvloop":
        return tw.run(main, loop_class=uvloop.Loop)
    raise ValueError(f"loop must be one of {', '.join(LOOPS)}, got {loop!r}")


def raise_fd_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard one (each connection is an fd)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Window:
    """What the server counts between ``mark`` and ``stats``."""

    def __init__(self, limit: int = 0) -> None:
        self.messages = 0
        # callgrind_server.py: the server stops after ``limit`` messages.
        self.limit = limit or sys.maxsize
        self.reached: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.cpu0 = time.process_time()
        self.wall0 = time.perf_counter()
        self.gc_pauses: list[float] = []
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, _info: dict[str, int]) -> None:
        # CPU time, not wall time: on a shared host the wall time of a
        # collection includes the time the process was not running.
        if phase == "start":
            self._gc_start = time.thread_time()
        else:
            self.gc_pauses.append(time.thread_time() - self._gc_start)

    def hit(self) -> None:
        if not self.reached.done():
            self.reached.set_result(None)

    def mark(self) -> None:
        self.messages = 0
        self.gc_pauses.clear()
        self.cpu0 = time.process_time()
        self.wall0 = time.perf_counter()

    def stats(self) -> dict[str, Any]:
        pauses = sorted(self.gc_pauses)
        window = {
            "cpu_s": time.process_time() - self.cpu0,
            "wall_s": time.perf_counter() - self.wall0,
            "messages": self.messages,
            "rss": rss_bytes(),
            "gc_count": len(pauses),
            "gc_max_s": pauses[-1] if pauses else 0.0,
            "gc_p99_s": pauses[int(0.99 * (len(pauses) - 1))] if pauses else 0.0,
        }
        # After the window: what one full collection of everything the server
        # holds costs (the pause a generation-2 collection makes while it
        # serves; a quiet server makes too few in a window to rank loops).
        # The median of three; the first also frees what the window left.
        window["gc_full_s"] = statistics.median(_full_collection() for _ in range(3))
        return window


def _full_collection() -> float:
    t0 = time.thread_time()
    gc.collect()
    return time.thread_time() - t0


class Timers:
    """Every timer the server's own code scheduled: how each one ended.

    ``early`` counts callbacks that ran before the deadline the server
    computed (``loop.time() + delay`` when it scheduled or moved the timer).
    """

    def __init__(self) -> None:
        self.scheduled = self.fired = self.cancelled = self.early = 0
        self.moved = 0
        self.max_early_s = 0.0  # the most any callback ran early, if at all

    def counts(self) -> dict[str, float]:
        return dict(vars(self))


# -- workload 1: aiohttp, asyncio.timeout around every handler ----------------
async def serve_http(opts: argparse.Namespace, window: Window, timers: Timers) -> Any:
    from aiohttp import web

    body = b"hello, world\n" * 8

    async def handler(_request: web.Request) -> web.Response:
        window.messages += 1
        if window.messages >= window.limit:
            window.hit()
        timers.scheduled += 1
        # A real handler's timeout around its (here in-memory) database call.
        async with asyncio.timeout(opts.timeout) as cm:
            response = web.Response(body=body)
        if cm.expired():
            timers.fired += 1
        else:
            timers.cancelled += 1
        return response

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port = runner.addresses[0][1]
    return port, runner.cleanup


# -- workload 2: websockets, many idle connections ----------------------------
async def serve_ws(opts: argparse.Namespace, window: Window, timers: Timers) -> Any:
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosedError

    conns: set[Any] = set()

    async def echo(ws: Any) -> None:
        conns.add(ws)
        try:
            async for message in ws:
                window.messages += 1
                await ws.send(message)
        except ConnectionClosedError:
            pass  # the clients abort their connections at the end of a round
        finally:
            conns.discard(ws)

    # Pings on with websockets' defaults unless told otherwise; compression
    # off: its per-connection buffers (about 64 KiB) would swamp the loop's
    # share of the memory (bench/README.md).
    server = await serve(
        echo, "127.0.0.1", 0, ping_interval=opts.ping_interval,
        ping_timeout=opts.ping_interval, compression=None, backlog=4096,
        max_queue=4,
    )  # fmt: skip
    port = server.sockets[0].getsockname()[1]
    window.extra = lambda: {"connections": len(conns)}  # type: ignore[attr-defined]

    async def close() -> None:
        server.close()
        await server.wait_closed()

    return port, close


# -- workload 3: an idle timeout moved on every message -----------------------
class IdleProtocol(asyncio.Protocol):
    """Echoes each message and pushes the connection's idle timeout back."""

    def __init__(self, opts: argparse.Namespace, window: Window, timers: Timers):
        self.opts, self.window, self.timers = opts, window, timers
        self.loop = asyncio.get_running_loop()
        self.postpone = opts.mode == "postpone"
        self.timer = opts.mode != "none"  # none: the floor, no timer at all
        self.handle: Any = None
        self.deadline = 0.0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if not self.timer:
            return
        self.deadline = self.loop.time() + self.opts.idle
        self.handle = self.loop.call_later(self.opts.idle, self.expire)
        self.timers.scheduled += 1

    def data_received(self, data: bytes) -> None:
        window = self.window
        window.messages += data.count(b"\n")
        if window.messages >= window.limit:
            window.hit()
        if not self.timer:
            self.transport.write(data)
            return
        idle = self.opts.idle
        self.deadline = self.loop.time() + idle
        if self.postpone:
            self.handle.postpone(idle)
        else:
            self.handle.cancel()
            self.timers.cancelled += 1
            self.handle = self.loop.call_later(idle, self.expire)
            self.timers.scheduled += 1
        self.timers.moved += 1
        self.transport.write(data)

    def expire(self) -> None:
        self.timers.fired += 1
        early = self.deadline - self.loop.time()
        if early > 0:
            self.timers.max_early_s = max(self.timers.max_early_s, early)
            # More than float rounding of ``time() + delay`` (about 1e-12 s).
            if early > 1e-9:
                self.timers.early += 1
        self.handle = None
        self.transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
            self.timers.cancelled += 1


async def serve_idle(opts: argparse.Namespace, window: Window, timers: Timers) -> Any:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: IdleProtocol(opts, window, timers), "127.0.0.1", 0, backlog=4096
    )
    port = server.sockets[0].getsockname()[1]

    async def close() -> None:
        server.close()
        await server.wait_closed()

    return port, close


SERVERS: dict[str, Callable[..., Coroutine[Any, Any, Any]]] = {
    "http": serve_http, "ws": serve_ws, "idle": serve_idle,
}  # fmt: skip


async def serve_main(opts: argparse.Namespace) -> None:
    """Start the workload's server and answer the control port until ``final``."""
    window, timers = Window(opts.exit_after), Timers()
    port, close = await SERVERS[opts.workload](opts, window, timers)
    done = asyncio.get_running_loop().create_future()

    async def control(reader: asyncio.StreamReader, writer: Any) -> None:
        async for line in reader:
            cmd = line.strip().decode()
            if cmd == "mark":
                window.mark()
                answer: dict[str, Any] = {}
            elif cmd == "stats":
                answer = window.stats()
                answer.update(getattr(window, "extra", dict)())
            else:  # final: every connection closed, then the timer counts
                await close()
                answer = timers.counts()
                answer["loop"] = type(asyncio.get_running_loop()).__name__
                answer["pending"] = pending_timers(opts.loop)
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
            if cmd == "final":
                writer.close()
                done.set_result(None)
                return

    ctl = await asyncio.start_server(control, "127.0.0.1", 0)
    print("PORTS", port, ctl.sockets[0].getsockname()[1], flush=True)
    await asyncio.wait([done, window.reached], return_when=asyncio.FIRST_COMPLETED)
    ctl.close()  # at the message limit, the connections die with the process


def pending_timers(loop_name: str) -> int | None:
    """Timers still pending (not cancelled) on the loop; None on uvloop."""
    loop: Any = asyncio.get_running_loop()
    if loop_name.startswith("tickwheel"):
        return len(tw.get_wheel(loop))
    if loop_name == "asyncio":
        return sum(1 for h in loop._scheduled if not h.cancelled())
    return None  # uvloop keeps its timers in libuv


# -- clients (always on uvloop) -----------------------------------------------
async def open_all(
    count: int, connect: Callable[[], Any], batch: int = 200
) -> list[Any]:
    """``count`` connections, at most ``batch`` handshakes in flight."""
    conns: list[Any] = []
    for start in range(0, count, batch):
        n = min(batch, count - start)
        conns += await asyncio.gather(*(connect() for _ in range(n)))
    return conns


async def stdin_lines() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    return reader


async def client_ws(opts: argparse.Namespace) -> dict[str, Any]:
    """Idle websockets (they answer the server's pings) and a trickle of echoes."""
    from websockets.asyncio.client import connect

    uri = f"ws://127.0.0.1:{opts.port}/"
    conns = await open_all(opts.count, lambda: connect(
        uri, ping_interval=None, compression=None, open_timeout=120,
        max_queue=4,
    ))  # fmt: skip
    commands = await stdin_lines()
    print("READY", flush=True)
    await commands.readline()  # go
    stop = asyncio.ensure_future(commands.readline())
    rtts: list[float] = []
    rnd = random.Random(opts.seed)
    while not stop.done():
        ws = rnd.choice(conns)
        t0 = time.perf_counter()
        await ws.send(b"%f" % t0)
        await ws.recv()
        rtts.append(time.perf_counter() - t0)
        await asyncio.sleep(rnd.expovariate(opts.rate))
    for ws in conns:
        ws.transport.abort()
    return {"rtts": rtts}


class PacedProtocol(asyncio.Protocol):
    """Sends MESSAGE, waits for the echo, sends again ``interval`` after the last."""

    def __init__(self, state: dict[str, Any], interval: float) -> None:
        self.state, self.interval = state, interval
        self.loop = asyncio.get_running_loop()
        self.sent_at = 0.0
        self.lost = self.loop.create_future()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def send(self) -> None:
        if self.state["sending"] and not self.transport.is_closing():
            self.sent_at = self.loop.time()
            self.state["sent"] += 1
            self.transport.write(MESSAGE)

    def data_received(self, data: bytes) -> None:
        self.state["received"] += data.count(b"\n")
        wait = self.sent_at + self.interval - self.loop.time()
        self.loop.call_later(max(wait, 0.0), self.send)

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


async def client_idle(opts: argparse.Namespace) -> dict[str, Any]:
    """Connections sending every 10-50 ms until ``stop``; then idle until closed."""
    loop = asyncio.get_running_loop()
    rnd = random.Random(opts.seed)
    state = {"sending": False, "sent": 0, "received": 0}

    async def connect() -> Any:
        interval = rnd.uniform(opts.interval_min, opts.interval_max)
        _t, proto = await loop.create_connection(
            lambda: PacedProtocol(state, interval), "127.0.0.1", opts.port
        )
        return proto

    conns = await open_all(opts.count, connect)
    commands = await stdin_lines()
    print("READY", flush=True)
    await commands.readline()  # go
    state["sending"] = True
    for proto in conns:
        loop.call_later(rnd.uniform(0, proto.interval), proto.send)
    await commands.readline()  # stop: the server's idle timeouts close them all
    state["sending"] = False
    if opts.idle > 0:  # 0: the server has no idle timeout (the floor)
        await asyncio.wait([p.lost for p in conns], timeout=opts.idle * 4 + 10)
    state["open"] = sum(not p.lost.done() for p in conns)
    for proto in conns:
        proto.transport.abort()
    return state


CLIENTS = {"ws": client_ws, "idle": client_idle}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("serve")
    s.add_argument("workload", choices=sorted(SERVERS))
    s.add_argument("loop", choices=LOOPS)
    c = sub.add_parser("client")
    c.add_argument("workload", choices=sorted(CLIENTS))
    c.add_argument("port", type=int)
    c.add_argument("count", type=int)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--rate", type=float, default=50.0, help="ws: echoes/s")
    c.add_argument("--interval-min", type=float, default=0.010)
    c.add_argument("--interval-max", type=float, default=0.050)
    for q in (s, c):
        q.add_argument("--idle", type=float, default=3.0, help="idle timeout, s")
    s.add_argument("--mode", choices=("cancel", "postpone", "none"), default="cancel")
    s.add_argument("--exit-after", type=int, default=0, help="messages, 0: never")
    s.add_argument("--timeout", type=float, default=10.0, help="handler timeout, s")
    s.add_argument("--ping-interval", type=float, default=20.0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    raise_fd_limit()
    if opts.role == "serve":
        run(opts.loop, serve_main(opts))
    else:
        print(json.dumps(uvloop.run(CLIENTS[opts.workload](opts))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
