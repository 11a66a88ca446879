"""A real aiohttp server and client over loopback on the tickwheel event loop.

aiohttp arms its keep-alive, read-timeout and websocket heartbeat timers with
``loop.call_at``/``loop.call_later`` and its client timeouts with
``asyncio.timeout`` or its own ``TimerContext`` (``loop.call_at`` again), so
on a tickwheel loop all of them run on the wheel.  Each test runs under
asyncio's default loop and under uvloop, through ``tw.run`` (which closes the
loop and shuts down the resolver's executor).  Bounds on elapsed time are
lower bounds (a timer never fires early) and generous hang guards only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tickwheel import compat_asyncio as tw
from tickwheel._asyncio_loop import _TickwheelLoop

aiohttp = pytest.importorskip("aiohttp")
from aiohttp import web  # noqa: E402

GUARD_S = 10.0  # a hang guard, never a speed claim


@pytest.fixture
def run(
    base: type[asyncio.AbstractEventLoop] | None,
) -> Callable[[Awaitable[Any]], Any]:
    """``tw.run`` on each base loop (the ``base`` fixture of conftest.py)."""

    def runner(coro: Any) -> Any:
        async def checked() -> Any:
            loop = asyncio.get_running_loop()
            assert isinstance(loop, _TickwheelLoop)
            assert base is None or isinstance(loop, base)
            return await coro

        return tw.run(checked(), loop_class=base)

    return runner


@asynccontextmanager
async def serve(app: web.Application, **kwargs: Any) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port); yield its base URL.

    Handlers are cancelled when their client goes away, so cleanup does not
    wait for a slow handler whose client timed out.
    """
    kwargs.setdefault("handler_cancellation", True)
    runner = web.AppRunner(app, **kwargs)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


async def hello(request: web.Request) -> web.Response:
    return web.Response(text="hello " + request.query.get("n", ""))


async def slow(request: web.Request) -> web.Response:
    await asyncio.sleep(float(request.query["s"]))
    return web.Response(text="slow")


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/", hello)
    app.router.add_get("/slow", slow)
    return app


def test_requests_over_keepalive_connection(run: Any) -> None:
    async def main() -> tuple[list[str], int]:
        wheel = tw.get_wheel()
        async with serve(make_app()) as url:
            connector = aiohttp.TCPConnector(limit=1)
            async with aiohttp.ClientSession(connector=connector) as session:
                bodies = []
                for n in range(20):
                    async with session.get(url, params={"n": str(n)}) as resp:
                        assert resp.status == 200
                        bodies.append(await resp.text())
                # The idle connection's keep-alive timers (server and
                # client pool) are now wheel timers.
                await asyncio.sleep(0.01)
                pending = len(wheel)
        return bodies, pending

    bodies, pending = run(main())
    assert bodies == [f"hello {n}" for n in range(20)]
    assert pending >= 1


def test_client_total_timeout_fires_not_early(run: Any) -> None:
    async def main() -> float:
        async with serve(make_app()) as url:
            timeout = aiohttp.ClientTimeout(total=0.05)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                # By the loop's own clock, as asyncio promises it: uvloop's
                # time() is libuv's cached uv_now() in whole milliseconds, so
                # by time.monotonic() stock uvloop can fire a call_at(time()
                # + 0.05) up to 1 ms "early", and so may the loop over it.
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                with pytest.raises(asyncio.TimeoutError):
                    async with session.get(url + "/slow", params={"s": "30"}):
                        pass
                elapsed = loop.time() - t0
                # The session still works after its request timed out (with
                # a hang guard of its own: 50 ms is no promise for a request).
                guard = aiohttp.ClientTimeout(total=GUARD_S)
                async with session.get(url, timeout=guard) as resp:
                    assert await resp.text() == "hello "
        return elapsed

    elapsed = run(main())
    # 1e-9: the float difference of two loop times (uvloop's are whole
    # milliseconds in seconds, e.g. 0.049999999999272 for 50 ms).
    assert 0.05 - 1e-9 <= elapsed < GUARD_S


def test_client_sock_read_timeout(run: Any) -> None:
    async def main() -> float:
        async with serve(make_app()) as url:
            timeout = aiohttp.ClientTimeout(sock_read=0.03)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                # The loop's clock, as in test_client_total_timeout_fires_not_early.
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                with pytest.raises(aiohttp.ServerTimeoutError):
                    async with session.get(url + "/slow", params={"s": "30"}):
                        pass
                return loop.time() - t0

    elapsed = run(main())
    assert 0.03 - 1e-9 <= elapsed < GUARD_S


def test_server_keepalive_expiry_closes_idle_connection(run: Any) -> None:
    async def main() -> tuple[bytes, float, int]:
        wheel = tw.get_wheel()
        async with serve(make_app(), keepalive_timeout=0.05) as url:
            host, port = url.removeprefix("http://").split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            # The loop's clock: aiohttp's keep-alive deadline is on it, and
            # under uvloop it is libuv's cached whole-millisecond uv_now(), so
            # by time.monotonic() the close can come up to 1 ms "early" (CI
            # saw 0.04990 s on 3.15).
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            writer.write(
                b"GET /?n=ka HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
            )
            head = await reader.readuntil(b"\r\n\r\n")
            assert b" 200 " in head.split(b"\r\n")[0]
            body = await reader.readexactly(len(b"hello ka"))
            pending = len(wheel)  # the server's keep-alive timer is on the wheel
            # Idle: the server closes the connection when keep-alive expires.
            rest = await asyncio.wait_for(reader.read(), GUARD_S)
            elapsed = loop.time() - t0
            writer.close()
            assert rest == b""
        return body, elapsed, pending

    body, elapsed, pending = run(main())
    assert body == b"hello ka"
    assert pending >= 1
    # aiohttp closes once loop.time() passes last-response + 0.05 s (it
    # re-arms if woken early); the response left after t0. 1e-9 as above.
    assert 0.05 - 1e-9 <= elapsed < GUARD_S


def test_websocket_heartbeat_pings_and_pong_timeout(run: Any) -> None:
    async def ws_handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=0.04)
        await ws.prepare(request)
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str("echo " + msg.data)
        return ws

    async def main() -> tuple[list[str], int, Any]:
        app = web.Application()
        app.router.add_get("/ws", ws_handler)
        async with serve(app) as url:
            async with aiohttp.ClientSession() as session:
                # 1. autoping client: heartbeats are answered, echo works for
                # several heartbeat periods.
                echoes = []
                async with session.ws_connect(url + "/ws", heartbeat=0.03) as ws:
                    for i in range(5):
                        await ws.send_str(str(i))
                        msg = await asyncio.wait_for(ws.receive(), GUARD_S)
                        echoes.append(msg.data)
                        await asyncio.sleep(0.03)
                    assert not ws.closed
                # 2. a client that never answers pings: it sees the server's
                # pings, then the server gives up (pong not received).
                pings = 0
                async with session.ws_connect(url + "/ws", autoping=False) as ws:
                    while True:
                        msg = await asyncio.wait_for(ws.receive(), GUARD_S)
                        if msg.type == aiohttp.WSMsgType.PING:
                            pings += 1
                            continue
                        break
                return echoes, pings, msg.type

    echoes, pings, last = run(main())
    assert echoes == [f"echo {i}" for i in range(5)]
    assert pings >= 1
    assert last in (
        aiohttp.WSMsgType.CLOSE,
        aiohttp.WSMsgType.CLOSING,
        aiohttp.WSMsgType.CLOSED,
        aiohttp.WSMsgType.ERROR,
    )


def test_many_concurrent_requests_with_timeouts(run: Any) -> None:
    async def main() -> int:
        async with serve(make_app()) as url:
            timeout = aiohttp.ClientTimeout(total=GUARD_S)
            async with aiohttp.ClientSession(timeout=timeout) as session:

                async def one(n: int) -> str:
                    async with session.get(url, params={"n": str(n)}) as resp:
                        return await resp.text()

                texts = await asyncio.gather(*(one(n) for n in range(200)))
        return sum(t == f"hello {n}" for n, t in enumerate(texts))

    assert run(main()) == 200
