"""What mypy --strict infers for the public context managers and factories.

Not collected by pytest: ``tests/test_typing.py`` runs mypy on this file and
compares each ``reveal_type`` with the comment at the end of its line (the
type's full name, or for a long one a part of it).  ``with X() as x`` must
give ``x`` the type of ``X``, subclasses included (``__enter__`` returns
``Self``).
"""

# ruff: noqa: F821 (reveal_type is known to mypy only)
from __future__ import annotations

import asyncio

from tickwheel import (
    DelayedOperationPurgatory,
    MockTimer,
    SystemTimer,
    Timer,
    compat_threading,
    scheduler,
)
from tickwheel import compat_asyncio as tw


class MyTimer(MockTimer):
    pass


class MyPurgatory(DelayedOperationPurgatory):
    pass


with SystemTimer(executor="inline") as system_timer:
    reveal_type(system_timer)  # tickwheel.timer.SystemTimer
    reveal_type(system_timer.schedule(5, print))  # tickwheel._wheel_py.TimerTask
with MockTimer() as mock_timer:
    reveal_type(mock_timer)  # tickwheel.timer.MockTimer
with MyTimer() as my_timer:
    reveal_type(my_timer)  # reveal_public.MyTimer
with DelayedOperationPurgatory("p", mock_timer) as purgatory:
    reveal_type(purgatory)  # tickwheel.purgatory.DelayedOperationPurgatory
with MyPurgatory("p", mock_timer) as my_purgatory:
    reveal_type(my_purgatory)  # reveal_public.MyPurgatory
reveal_type(compat_threading.get_timer())  # tickwheel.timer.SystemTimer
reveal_type(Timer(1.0, print))  # tickwheel.compat_threading.Timer
reveal_type(scheduler().enter(1, 1, print))  # sched.Event
reveal_type(tw.new_event_loop())  # asyncio.events.AbstractEventLoop
reveal_type(tw.EventLoopPolicy())  # tickwheel._asyncio_loop.EventLoopPolicy


async def main() -> None:
    async with tw.timeout(1.0) as cm:
        reveal_type(cm)  # tickwheel._asyncio_wheel.Timeout
    async with tw.timeout_at(None) as cm_at:
        reveal_type(cm_at)  # tickwheel._asyncio_wheel.Timeout
    wheel = tw.get_wheel()
    reveal_type(wheel)  # _asyncio_wheel.TimerWheel
    reveal_type(tw.call_later(1.0, print))  # tickwheel._asyncio_wheel.TimerHandle
    reveal_type(tw.call_at(1.0, print))  # tickwheel._asyncio_wheel.TimerHandle
    reveal_type(wheel.call_later(1.0, print))  # tickwheel._asyncio_wheel.TimerHandle
    reveal_type(wheel.timeout(1.0))  # tickwheel._asyncio_wheel.Timeout
    reveal_type(tw.TimerWheel(asyncio.get_running_loop()))  # _asyncio_wheel.TimerWheel


reveal_type(tw.run(main()))  # None
