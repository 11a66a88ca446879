"""What mypy --strict infers for the public context managers and factories.

Not collected by pytest: ``tests/test_typing.py`` runs mypy on this file and
compares each ``reveal_type`` with the comment at the end of its line (the
type's full name, or for a long one a part of it).  ``with X() as x`` must
give ``x`` the type of ``X``, subclasses included (``__enter__`` returns
``Self``).  Every tickwheel name mypy shows is a public one
(``tickwheel.TimerTask``, ``tickwheel.compat_asyncio.Timeout``), never the
private module that defines the class at runtime.
"""

# ruff: noqa: F821 (reveal_type is known to mypy only)
from __future__ import annotations

import asyncio

from tickwheel import (
    DelayedOperation,
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
    reveal_type(system_timer.schedule(5, print))  # tickwheel.TimerTask
with MockTimer() as mock_timer:
    reveal_type(mock_timer)  # tickwheel.timer.MockTimer
    reveal_type(mock_timer.wheel)  # tickwheel.TimingWheel
    reveal_type(mock_timer.wheel.bucket(0))  # tickwheel.TimerTaskList
with MyTimer() as my_timer:
    reveal_type(my_timer)  # reveal_public.MyTimer
with DelayedOperationPurgatory("p", mock_timer) as purgatory:
    reveal_type(purgatory)  # tickwheel.purgatory.DelayedOperationPurgatory
    reveal_type(purgatory.cancel_for_key("k"))  # list[tickwheel.DelayedOperation]
with MyPurgatory("p", mock_timer) as my_purgatory:
    reveal_type(my_purgatory)  # reveal_public.MyPurgatory
reveal_type(DelayedOperation.force_complete)  # tickwheel.DelayedOperation
reveal_type(DelayedOperationPurgatory)  # timer: tickwheel.timer.SystemTimer
reveal_type(compat_threading.get_timer())  # tickwheel.timer.SystemTimer
reveal_type(Timer(1.0, print))  # tickwheel.compat_threading.Timer
reveal_type(scheduler().enter(1, 1, print))  # sched.Event
reveal_type(tw.new_event_loop())  # asyncio.events.AbstractEventLoop
reveal_type(tw.EventLoopPolicy())  # tickwheel.compat_asyncio.EventLoopPolicy


async def main() -> None:
    async with tw.timeout(1.0) as cm:
        reveal_type(cm)  # tickwheel.compat_asyncio.Timeout
    async with tw.timeout_at(None) as cm_at:
        reveal_type(cm_at)  # tickwheel.compat_asyncio.Timeout
    wheel = tw.get_wheel()
    reveal_type(wheel)  # tickwheel.compat_asyncio.TimerWheel
    reveal_type(tw.call_later(1.0, print))  # tickwheel.compat_asyncio.TimerHandle
    reveal_type(tw.call_at(1.0, print))  # tickwheel.compat_asyncio.TimerHandle
    reveal_type(wheel.call_later(1.0, print))  # tickwheel.compat_asyncio.TimerHandle
    reveal_type(wheel.timeout(1.0))  # tickwheel.compat_asyncio.Timeout
    private = tw.TimerWheel(asyncio.get_running_loop())
    reveal_type(private)  # tickwheel.compat_asyncio.TimerWheel


reveal_type(tw.run(main()))  # None
