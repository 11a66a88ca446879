"""asyncio timers on a timing wheel: ``call_later``/``call_at`` and ``timeout()``.

Why: asyncio keeps every ``call_later`` handle in one binary heap.  Adding is
O(log n), cancelling only flags the handle, and the heap holds cancelled
handles until they reach its top or until more than half of it is dead.  A
server with 100,000 idle-connection timeouts that are almost always cancelled
pays for that churn on every request.  Each handle also costs about 200 bytes
(handle, float deadline, a copied ``contextvars.Context``, heap slot).

Here a :class:`TimerWheel` bound to one event loop keeps the timers in
tickwheel's hierarchical wheel and is driven by a *single* ``loop.call_at``
handle, armed for the earliest due bucket.  No thread is started and every
callback runs in the loop thread, inside its own context, like asyncio's.

* add is O(levels), cancel is O(1) (the node is unlinked at once);
* a pending handle is one object of 96 bytes (104 with a non-empty context);
* callbacks due in the same millisecond run in one loop callback.

Worked example: ``call_later(0.250, cb)`` at loop time 10.0 s rounds the
deadline up to the 1 ms tick (10 250 ms) and links the handle into the level-1
bucket for the slot starting at 10 240 ms.  If that bucket is now the earliest
one, the wheel (re)arms its one ``loop.call_at(10.240, ...)``.  At 10.240 the
driver polls the bucket, moves the handle down to level 0 and re-arms for
10.250, where the callback runs.  Cancelling any time before that unlinks it.

Entry points:

* :func:`get_wheel` returns the wheel of a loop (created on first use and
  kept while the loop lives); :class:`TimerWheel` makes a private one.
* :func:`call_later`, :func:`call_at`, :func:`timeout`, :func:`timeout_at`
  act on the running loop's wheel, with the signatures of
  ``loop.call_later``, ``loop.call_at``, ``asyncio.timeout`` and
  ``asyncio.timeout_at``.

>>> import asyncio
>>> from tickwheel import compat_asyncio as tw
>>> async def main():
...     fired = asyncio.Event()
...     handle = tw.call_later(0.01, fired.set)
...     await fired.wait()
...     try:
...         async with tw.timeout(0.01):
...             await asyncio.sleep(10)
...     except TimeoutError:
...         return "timed out", handle.cancelled()
>>> asyncio.run(main())
('timed out', False)

Documented differences from asyncio (tested in ``tests/test_compat_asyncio.py``):

* Each handle keeps its exact deadline (``handle._when``, as in asyncio);
  ``TimerHandle.when()`` reads it rounded *up* to the wheel tick (1 ms by
  default).  On asyncio's loops a callback runs once the loop's clock
  reaches its exact deadline, and those due within one tick run by exact
  deadline, equal deadlines as scheduled (unless the earlier one was filed
  on a coarser wheel level).  Over uvloop, whose timers have 1 ms
  resolution, they run at the first whole millisecond at or after it.
  (``Timeout.when()`` returns the exact value you gave.)
* ``cancel()`` returns True iff it stopped the callback (asyncio returns
  None); cancelling a handle whose callback already ran leaves
  ``cancelled()`` False (asyncio reports True).
* Bad arguments raise at the call: a non-callable callback (TypeError), a
  non-numeric or NaN delay (TypeError/ValueError).  asyncio checks callbacks
  only in debug mode.  Infinite or enormous delays are clamped to
  ``MAX_DELAY_MS`` (about 146 years), so ``when()`` stays finite.
* On Python < 3.11 (no ``Task.uncancel()``), a CancelledError that reaches
  an expired ``timeout()`` block always becomes TimeoutError, even if the
  task was also cancelled from outside; that TimeoutError is also an
  ``asyncio.TimeoutError`` (a different class before 3.11).  From 3.11 on,
  ``timeout()`` follows the running Python's ``asyncio.timeout`` (3.13
  changed how it treats exceptions other than CancelledError).
* Handles and ``Timeout`` have ``postpone(delay)``, which moves a pending
  timer to ``delay`` seconds from now (asyncio: cancel() + call_later()).
* Exceptions in callbacks go to ``loop.call_exception_handler`` as in
  asyncio; ``SystemExit``/``KeyboardInterrupt`` propagate out of the loop and
  the remaining due callbacks run on the next iteration.
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Any

from ._asyncio_handles import TimerHandle
from ._asyncio_loop import new_event_loop, run
from ._asyncio_wheel import (
    Timeout,
    TimerWheel,
    call_at,
    call_later,
    get_wheel,
    timeout,
    timeout_at,
)

__all__ = [
    "Timeout",
    "TimerHandle",
    "TimerWheel",
    "call_at",
    "call_later",
    "get_wheel",
    "new_event_loop",
    "run",
    "timeout",
    "timeout_at",
]

# Event loop policies are deprecated from Python 3.14 and gone in 3.16.  There
# asyncio's DefaultEventLoopPolicy warns when it is looked up and has left
# asyncio.__all__; EventLoopPolicy does the same with the same warning, so
# `asyncio.set_event_loop_policy(tw.EventLoopPolicy())` warns exactly as
# `asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())` does.
if TYPE_CHECKING or sys.version_info < (3, 14):
    from ._asyncio_loop import EventLoopPolicy

    __all__ += ["EventLoopPolicy"]
else:

    def __getattr__(name: str) -> Any:
        if name == "EventLoopPolicy" and sys.version_info < (3, 16):
            # warnings._deprecated's message, as asyncio.__getattr__ gives it.
            warnings.warn(
                f"{__name__ + '.' + name!r} is deprecated and slated for "
                "removal in Python 3.16",
                DeprecationWarning,
                stacklevel=2,
            )
            from ._asyncio_loop import EventLoopPolicy

            return EventLoopPolicy
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
