"""Issue 30: the tickwheel event loop runs timers in asyncio's order and time.

Ports of the races other people's test suites met (websockets at
``WEBSOCKETS_TESTS_TIMEOUT_FACTOR=1``): timers of one millisecond run by
exact deadline, ties as scheduled; a deadline under one tick ahead does not
wait for the next tick boundary; a reply delayed 1 ms beats a 2 ms close
timeout scheduled a little earlier.  Each runs on both cores and both base
loops, and where the outcome is a race the same scenario runs on the plain
base loop too: the tickwheel loop must do no worse than it.  No speed is
asserted; the few real waits are a millisecond or two.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from tickwheel import _impl, compat_asyncio

try:
    import uvloop
except ImportError:  # pragma: no cover (Windows: no uvloop)
    uvloop = None


@pytest.fixture
def tw() -> ModuleType:
    """``tickwheel.compat_asyncio``: the event loop exists once per process, on
    the core ``tickwheel._impl`` chose (``TICKWHEEL_NO_EXTENSIONS=1`` runs
    these tests on the twin, as for tests/test_compat_asyncio_loop.py)."""
    return compat_asyncio


@pytest.fixture
def dropin(impl: ModuleType) -> ModuleType:
    """``tickwheel.compat_asyncio`` on the core under test (both in one run)."""
    if issubclass(compat_asyncio.TimerWheel, impl.TimerCore):
        return compat_asyncio
    if impl.__name__ != "tickwheel._wheel_py":
        pytest.fail("tickwheel.compat_asyncio is not on the compiled core")
    module: ModuleType = _impl.twin_package().compat_asyncio
    assert issubclass(module.TimerWheel, impl.TimerCore)
    return module


@pytest.fixture
def loop(
    tw: ModuleType, base: type[asyncio.AbstractEventLoop] | None
) -> Iterator[asyncio.AbstractEventLoop]:
    lp = tw.new_event_loop(base)
    try:
        yield lp
    finally:
        lp.close()


def _plain(base: type[asyncio.AbstractEventLoop] | None) -> asyncio.AbstractEventLoop:
    return asyncio.new_event_loop() if base is None else base()


def _on_uvloop(loop: asyncio.AbstractEventLoop) -> bool:
    return uvloop is not None and isinstance(loop, uvloop.Loop)


def _spin(seconds: float) -> None:
    # Let the clock move inside one callback (the reply "a few hundred
    # microseconds later" of the websockets race).
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _run(loop: asyncio.AbstractEventLoop, make: Callable[[], Any]) -> Any:
    return loop.run_until_complete(make())


#: Attempts of a scenario whose timers must all be scheduled before the tick
#: they share begins (see _ahead).
STALL_ATTEMPTS = 5


class _Stalled(Exception):
    """The host stalled the test past its own deadlines while it was still
    scheduling them: the scenario did not happen, so it runs again."""


def _ahead(ms: int = 30) -> float:
    """A millisecond boundary ``ms`` ahead (every timer a scenario schedules
    before it shares the boundary's tick)."""
    return (int(time.monotonic() * 1000) + ms) / 1000


def _check_ahead(start: float, handles: list[Any]) -> None:
    """Cancel ``handles`` and raise _Stalled if ``start`` is no longer ahead."""
    if time.monotonic() >= start:
        for h in handles:
            h.cancel()
        raise _Stalled


def _run_ahead(loop: asyncio.AbstractEventLoop, make: Callable[[], Any]) -> Any:
    """``_run``, again after a stall (a loaded CI host once held a test
    0.27 s); fails if every attempt stalled, never skips."""
    for _ in range(STALL_ATTEMPTS - 1):
        try:
            return _run(loop, make)
        except _Stalled:
            continue
    return _run(loop, make)


# -- order inside a tick --------------------------------------------------------------


def test_one_tick_runs_by_exact_deadline_ties_as_scheduled(
    loop: asyncio.AbstractEventLoop, tw: ModuleType
) -> None:
    async def main() -> list[str]:
        log: list[str] = []
        lp = asyncio.get_running_loop()
        # A millisecond boundary a few ticks ahead: all of these share its tick.
        start = _ahead()
        handles = [
            lp.call_at(start + 0.0009, log.append, "late"),
            lp.call_at(start + 0.0003, log.append, "tie-1"),
            lp.call_at(start + 0.0006, log.append, "middle"),
            lp.call_at(start + 0.0003, log.append, "tie-2"),  # same deadline, later
        ]
        handle = lp.call_at(start + 0.0001, log.append, "early")
        _check_ahead(start, [*handles, handle])
        assert isinstance(handle, tw.TimerHandle)
        # asyncio's when() and _when: the time asked for, as given; the
        # wheel's tick is its own attribute.
        assert handle.when() == handle._when == start + 0.0001
        assert handle.expiration_ms == round((start + 0.001) * 1000)
        await asyncio.sleep(0.04)
        return log

    assert _run_ahead(loop, main) == ["early", "tie-1", "tie-2", "middle", "late"]


def test_tick_order_on_the_compat_wheel_of_a_plain_loop(
    dropin: ModuleType, base: type[asyncio.AbstractEventLoop] | None
) -> None:
    tw = dropin

    # The drop-ins (tw.call_at on a stock loop's wheel) order the same way.
    async def main() -> list[int]:
        log: list[int] = []
        start = _ahead()
        handles = [
            tw.call_at(start + offset, log.append, i)
            for i, offset in enumerate([0.0008, 0.0002, 0.0005, 0.0002])
        ]
        _check_ahead(start, handles)
        await asyncio.sleep(0.04)
        return log

    lp = _plain(base)
    try:
        assert _run_ahead(lp, main) == [1, 3, 2, 0]
    finally:
        lp.close()


def test_callbacks_never_run_before_their_exact_deadline(
    loop: asyncio.AbstractEventLoop,
) -> None:
    async def main() -> list[tuple[float, float]]:
        seen: list[tuple[float, float]] = []
        lp = asyncio.get_running_loop()
        handles = []

        def record(i: int) -> None:
            seen.append((handles[i]._when, time.monotonic()))

        for i in range(40):
            handles.append(lp.call_later(i * 0.00013, record, i))
        await asyncio.sleep(0.02)
        return seen

    seen = _run(loop, main)
    assert len(seen) == 40
    whens = [when for when, _ in seen]
    assert whens == sorted(whens)
    # The wheel reads CLOCK_MONOTONIC in ns; time.monotonic() is the same
    # clock as a float, good to well under a microsecond.
    assert all(now >= when - 1e-6 for when, now in seen)


# -- sub-tick deadlines ---------------------------------------------------------------


async def _three_steps() -> str:
    for _ in range(3):
        await asyncio.sleep(0)
    return "done"


def _sub_ms_wait_for(loop: asyncio.AbstractEventLoop, rounds: int) -> int:
    async def main() -> int:
        timed_out = 0
        for _ in range(rounds):
            try:
                await asyncio.wait_for(_three_steps(), 1e-6)
            except asyncio.TimeoutError:
                timed_out += 1
        return timed_out

    return _run(loop, main)  # type: ignore[no-any-return]


def test_sub_millisecond_wait_for_times_out_as_on_the_base_loop(
    loop: asyncio.AbstractEventLoop, base: type[asyncio.AbstractEventLoop] | None
) -> None:
    ours = _sub_ms_wait_for(loop, 50)
    plain = _plain(base)
    try:
        theirs = _sub_ms_wait_for(plain, 50)
    finally:
        plain.close()
    if not _on_uvloop(loop):
        assert theirs == 50  # asyncio runs a 1 us deadline on the next iteration
    assert ours >= theirs


class _VirtualTimeLoop(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type]
    """asyncio's loop on a clock that moves only when the test moves it."""

    now = 1000.0

    def time(self) -> float:
        return self.now


def test_sub_tick_deadline_runs_at_its_exact_time(dropin: ModuleType) -> None:
    tw = dropin

    # The manual clock: a 100 us timer set 200 us into a tick runs once the
    # clock passes its deadline (0.3 ms into the tick), not at the tick's end.
    async def main() -> list[str]:
        lp = asyncio.get_running_loop()
        log: list[str] = []
        lp.now = 1000.0002  # type: ignore[attr-defined]
        handle = lp.call_later(0.0001, log.append, "fired")
        assert handle._when == pytest.approx(1000.0003, abs=1e-9)
        lp.now = 1000.00029  # type: ignore[attr-defined]
        for _ in range(5):
            await asyncio.sleep(0)
        log.append("before")  # never early
        lp.now = 1000.00031  # type: ignore[attr-defined]
        for _ in range(5):
            await asyncio.sleep(0)
        log.append("after")  # well before the tick boundary at 1000.001
        return log

    lp = tw.new_event_loop(_VirtualTimeLoop)
    try:
        assert _run(lp, main) == ["before", "fired", "after"]
    finally:
        lp.close()


# -- a reply racing a close timeout ---------------------------------------------------


def _reply_race(loop: asyncio.AbstractEventLoop, rounds: int) -> tuple[int, int]:
    """websockets' race: a 2 ms close timeout, then a reply delayed 1 ms.

    The reply is scheduled ~300 us after the timeout, so its deadline is
    ~700 us earlier and asyncio runs it first.  Returns (rounds decided
    against the earlier deadline, rounds compared).  The deadlines are the
    handles' exact ones (``_when``, what the loop orders by; ``when()`` is
    rounded up to the wheel's tick), so a thread preempted between reading
    the clock and scheduling cannot make a right order look wrong; a round whose
    two deadlines ended up within 50 us of each other (a spin preempted for
    a millisecond on a loaded host) is not compared.
    """

    async def main() -> tuple[int, int]:
        lp = asyncio.get_running_loop()
        wrong = compared = 0
        for _ in range(rounds):
            closed = lp.create_future()
            deadlines: dict[str, float] = {}

            def schedule() -> None:
                deadlines["timeout"] = lp.call_later(
                    0.002, lambda: closed.done() or closed.set_result("timeout")
                )._when
                _spin(0.0003)
                deadlines["reply"] = lp.call_later(
                    0.001, lambda: closed.done() or closed.set_result("reply")
                )._when

            lp.call_soon(schedule)
            winner = await closed
            await asyncio.sleep(0.003)  # let the loser run
            if abs(deadlines["timeout"] - deadlines["reply"]) < 50e-6:
                continue
            compared += 1
            wrong += winner != min(deadlines, key=deadlines.__getitem__)
        return wrong, compared

    return _run(loop, main)  # type: ignore[no-any-return]


def test_reply_beats_a_later_close_timeout(
    loop: asyncio.AbstractEventLoop, base: type[asyncio.AbstractEventLoop] | None
) -> None:
    # On the plain base loops asyncio's heap gets this right; libuv's 1 ms
    # timers do not (stock uvloop runs the timeout first in most rounds): the
    # tickwheel loop runs the earlier deadline first over both.  Over uvloop
    # it wakes on libuv's whole milliseconds, so a round preempted across one
    # may still go the other way: "no worse than uvloop" is the contract
    # there, and a tenth of the rounds is far better than that.
    wrong, compared = _reply_race(loop, 20)
    assert compared >= 10
    assert wrong <= (0 if base is None else compared // 10)


# -- when(): the time asked for; over uvloop, one clock --------------------------------


def test_call_at_when_is_the_time_given(
    loop: asyncio.AbstractEventLoop, dropin: ModuleType
) -> None:
    # asyncio's handle returns the float it was given; a deadline in whole
    # nanoseconds cannot (loop.time() floats carry a fraction of a ns).
    async def main() -> None:
        lp = asyncio.get_running_loop()
        now = lp.time()
        for t in (now + 0.0001, now + 1 / 3, now + 2.5e-10, now + 30.0, now - 10.0):
            for handle in (lp.call_at(t, print), dropin.call_at(t, print)):
                assert handle.when() == handle._when == t, (t, handle)
                assert handle.deadline_ns >= t * 1e9 - 1  # never before t
                handle.cancel()
                assert handle.when() == t
        # call_later: the exact deadline, from the clock the wheel read.
        later = lp.call_later(0.5, print)
        assert later.when() == later.deadline_ns / 1e9
        assert now + 0.5 <= later.when() < lp.time() + 0.5 + 1e-9
        later.cancel()

    _run(loop, main)


def test_postpone_moves_when_to_the_new_deadline(
    loop: asyncio.AbstractEventLoop,
) -> None:
    async def main() -> None:
        lp = asyncio.get_running_loop()
        t = lp.time() + 0.25
        handle = lp.call_at(t, print)
        assert handle.postpone(1.0)
        assert handle.when() == handle.deadline_ns / 1e9 >= t + 0.75
        handle.cancel()

    _run(loop, main)


def test_no_callback_runs_before_its_when(
    loop: asyncio.AbstractEventLoop, base: type[asyncio.AbstractEventLoop] | None
) -> None:
    # Delays around the tick, where when() read the rounded-up tick while
    # the callback ran at the exact deadline (0.5-2.3 ms).  Over uvloop the
    # tickwheel loop's time() is the wheel's own clock, so no callback sees
    # time() below when() there either (uvloop's cached clock can).
    async def main() -> list[tuple[float, float]]:
        lp = asyncio.get_running_loop()
        early: list[tuple[float, float]] = []
        done = lp.create_future()
        left = [300]

        def check(box: list[Any]) -> None:
            now, when = lp.time(), box[0].when()
            if now < when:
                early.append((now, when))
            left[0] -= 1
            if not left[0]:
                done.set_result(None)

        for i in range(300):
            box: list[Any] = []
            box.append(lp.call_later(0.0005 + (i % 19) * 0.0001, check, box))
            if i % 3 == 0:
                await asyncio.sleep(0)
        await done
        return early

    assert _run(loop, main) == []


def test_call_later_and_call_at_keep_their_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    # call_later(d), then call_at(loop.time() + d): the first scheduled runs
    # first, as on asyncio's loop and on uvloop (whose time() and call_later
    # both read libuv's cached clock); and neither runs before its delay has
    # passed in real time.
    async def main() -> tuple[list[int], list[str]]:
        lp = asyncio.get_running_loop()
        swapped: list[int] = []
        early: list[str] = []
        runs: dict[int, list[str]] = {}
        done = lp.create_future()

        def ran(i: int, kind: str, start: float, delay: float) -> None:
            if time.monotonic() - start < delay:
                early.append(f"{kind} {i}")
            runs.setdefault(i, []).append(kind)
            if len(runs) == 200 and all(len(r) == 2 for r in runs.values()):
                done.set_result(None)

        for i in range(200):
            d = 0.001 + (i % 7) * 0.0003
            start = time.monotonic()
            lp.call_later(d, ran, i, "later", start, d)
            lp.call_at(lp.time() + d, ran, i, "at", start, d)
            if i % 5 == 0:
                await asyncio.sleep(0)
        await done
        swapped = [i for i, r in runs.items() if r != ["later", "at"]]
        return swapped, early

    assert _run(loop, main) == ([], [])


def test_time_is_the_wheels_clock(loop: asyncio.AbstractEventLoop) -> None:
    # One clock for time(), call_later and call_at: the wheel's (over uvloop
    # the fresh monotonic clock rather than libuv's cached one).
    wheel = compat_asyncio.get_wheel(loop)
    before = time.monotonic()
    now = loop.time()
    assert before <= now <= time.monotonic()
    assert abs(wheel.time() - now) < 0.05
