"""A tickwheel event loop: every ``call_later``/``call_at`` on the loop's wheel.

Why: most timers of an asyncio program are not created by its own code but by
``asyncio.sleep``, ``asyncio.wait_for``, ``asyncio.timeout`` and libraries
calling ``loop.call_later`` (aiohttp's keep-alive and heartbeat timers,
database drivers' query timeouts).  They all end in ``loop.call_later`` or
``loop.call_at``, so a loop whose two methods put the callback on its
:class:`~tickwheel.compat_asyncio.TimerWheel` moves all of them to the wheel
with one line, as uvloop moves a program to libuv:

>>> import asyncio
>>> from tickwheel import compat_asyncio as tw
>>> async def main():
...     loop = asyncio.get_running_loop()
...     await asyncio.sleep(0.001)                 # a wheel timer now
...     handle = loop.call_later(30, print, "never")
...     pending = len(tw.get_wheel(loop))
...     handle.cancel()                            # O(1): unlinked at once
...     return isinstance(handle, tw.TimerHandle), pending, len(tw.get_wheel(loop))
>>> tw.run(main())
(True, 1, 0)

The loop is an instance of a subclass of the *base* loop class (asyncio's
default loop, ``uvloop.Loop``, or any ``AbstractEventLoop``): only
``call_later``, ``call_at``, ``set_debug`` and ``close`` are overridden, so
I/O, ``call_soon``, executors and signals are the base loop's own code.  The
base loop's timer heap holds one handle, the wheel's driver, armed for the
earliest due bucket; the wheel reaches the base loop's ``call_at`` through
:meth:`_TickwheelLoop._tickwheel_base_call_at` (``TimerWheel._arm`` looks for
it).  A call that arrives while that method runs (uvloop's ``call_at`` calls
``self.call_later``) goes to the base loop too.

Worked example: ``await asyncio.sleep(5)`` at loop time 100.0 s calls
``loop.call_later(5, ...)``; the handle is linked into the wheel's level-1
bucket for 104 980 ms (20 ms slots at tick 1 ms, wheel size 20).  If that
bucket is now the earliest, the wheel re-arms its one base handle for
104.98 s; then it cascades the handle down and re-arms for 105.000 s.
Cancelling the sleep unlinks the node in O(1); asyncio would flag the handle
and leave it in its heap until it reached the top.

Checks kept from asyncio: a closed loop raises RuntimeError("Event loop is
closed"); in debug mode a call from a thread other than the one running the
loop raises RuntimeError, and a coroutine (function) as callback raises
TypeError.  These run on a flagged slow path, so the common call costs one
attribute test.  Timers run in asyncio's order and time: each at its exact
deadline (never early), those of one tick by deadline, and
``TimerHandle.when()`` is that deadline (``call_at(t).when() == t``).  Over
uvloop, ``time()`` is ``time.monotonic()``, the clock the wheel reads, not
libuv's cached one, so ``call_later(d)`` and ``call_at(loop.time() + d)``
run in the order they were scheduled.  Differences: ``close()`` cancels
the pending wheel timers (their ``cancelled()`` turns True); a ``loop.time`` replaced
on the instance is not seen by the wheel (override ``time()`` in a
subclass instead); in debug mode a slow wheel callback is reported as the
driver's (``TimerWheel._fire``) slow run.

Import the public names from :mod:`tickwheel.compat_asyncio`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from asyncio import coroutines as _coroutines
from asyncio import events as _events
from collections.abc import Callable, Coroutine
from time import monotonic as _monotonic
from typing import TYPE_CHECKING, Any, TypeVar, cast

from . import _asyncio_wheel as _layer

if TYPE_CHECKING:
    import contextvars

    from ._asyncio_wheel import TimerHandle, TimerWheel

__all__ = ["EventLoopPolicy", "new_event_loop", "run"]

_T = TypeVar("_T")

# The wheel layer below this one (compat_asyncio re-exports both); the hot
# path reads these as plain globals.
_get_wheel: Any = _layer.get_wheel

_get_running_loop = _events._get_running_loop
_iscoroutine = _coroutines.iscoroutine
# inspect's, not asyncio.coroutines': 3.14 deprecates that one (gone in 3.16).
_iscoroutinefunction = inspect.iscoroutinefunction
_THREAD_MESSAGE = (
    "Non-thread-safe operation invoked on an event loop other than the current one"
)


class _TickwheelLoop(asyncio.AbstractEventLoop):
    """Mixin put in front of a base loop class: its timers go on the wheel.

    ``_tw_fast`` is the wheel while no check is needed, and None while one is
    (debug mode, a closed loop, a call forwarded to the base loop, or
    construction not finished): then the checked path runs.  Otherwise the
    loop's ``call_later`` and ``call_at`` are the wheel's
    ``TimerCore._loop_call_later`` / ``_loop_call_at``, installed as instance
    attributes (see ``_tw_update_guard``): one C call that copies the
    context, builds the handle and links it.
    """

    _tw_wheel: TimerWheel | None
    _tw_fast: TimerWheel | None
    # The base class's time() where this class replaced it (see _loop_class).
    _tw_base_time: Callable[[asyncio.AbstractEventLoop], float] | None = None
    _tw_base_depth: int
    _tw_asyncio_base: bool
    _debug: bool  # asyncio.BaseEventLoop's (read only when the base is one)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._tw_wheel = self._tw_fast = None
        self._tw_base_depth = 0
        self._tw_asyncio_base = isinstance(self, asyncio.BaseEventLoop)
        super().__init__(*args, **kwargs)
        self._tw_wheel = _get_wheel(self)
        self._tw_update_guard()

    # -- timers ---------------------------------------------------------------
    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> TimerHandle | asyncio.TimerHandle:
        """``loop.call_later`` on the loop's wheel; returns a wheel TimerHandle."""
        wheel = self._tw_fast
        if wheel is None:
            if self._tw_checked(callback, "call_later"):
                return super().call_later(delay, callback, *args, context=context)
            wheel = self._tw_wheel
            assert wheel is not None
        # Reached while a check is due, or as type(loop).call_later(loop, ...):
        # the instance attribute (see _tw_update_guard) is the same call.
        return wheel._loop_call_later(  # type: ignore[no-any-return]
            delay, callback, *args, context=context
        )

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> TimerHandle | asyncio.TimerHandle:
        """``loop.call_at`` on the loop's wheel (``when`` on the loop's clock)."""
        wheel = self._tw_fast
        if wheel is None:
            if self._tw_checked(callback, "call_at"):
                return super().call_at(when, callback, *args, context=context)
            wheel = self._tw_wheel
            assert wheel is not None
        # As call_later: the instance attribute is this same call.  The
        # handle keeps ``when`` as its exact deadline: equal ``when``s are
        # ties (run as scheduled), as in asyncio's heap.
        return wheel._loop_call_at(  # type: ignore[no-any-return]
            when, callback, *args, context=context
        )

    def _tickwheel_base_call_at(
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """The base loop's ``call_at``: how the wheel arms its one driver handle."""
        if self._tw_asyncio_base:
            # asyncio's call_at never calls call_later.  In debug mode the
            # driver's handle is made without a "created at" traceback: it
            # would show only the wheel's frames, and the stack walk (tens of
            # microseconds) on every re-arm delayed the I/O of debug-mode
            # programs behind their timers (websockets' close tests).
            debug, self._debug = self._debug, False
            try:
                return super().call_at(when, callback, *args, context=context)
            finally:
                self._debug = debug
        fast = self._tw_fast
        # uvloop's call_at calls self.call_later: the base's, not the wheel's.
        installed = _drop_attr(self, "call_later"), _drop_attr(self, "call_at")
        self._tw_base_depth += 1
        self._tw_fast = None
        try:
            base_time = self._tw_base_time
            if base_time is not None:
                # time() is the fresh clock (see _loop_class); the base's
                # timers run on its own cached one, so measure from that,
                # as its call_at does, or the driver would wake early.
                delay = when - base_time(self)
                return super().call_later(delay, callback, *args, context=context)
            return super().call_at(when, callback, *args, context=context)
        finally:
            self._tw_base_depth -= 1
            self._tw_fast = fast
            for name, method in zip(("call_later", "call_at"), installed):
                if method is not None:
                    _set_attr(self, name, method)

    def _tw_checked(self, callback: object, method: str) -> bool:
        """asyncio's checks (closed loop; thread and callback in debug mode).

        :return: True if the call goes to the base loop instead of the wheel
        """
        if self._tw_base_depth or self._tw_wheel is None:
            return True
        if self.is_closed():
            raise RuntimeError("Event loop is closed")
        if self.get_debug():
            # asyncio's _check_thread: the loop is running in another thread.
            if self.is_running() and _get_running_loop() is not self:
                raise RuntimeError(_THREAD_MESSAGE)
            if _iscoroutine(callback) or _iscoroutinefunction(callback):
                raise TypeError(f"coroutines cannot be used with {method}()")
            if not callable(callback):
                raise TypeError(
                    f"a callable object was expected by {method}(), got {callback!r}"
                )
        return False

    def _tw_update_guard(self) -> None:
        checked = self._tw_base_depth or self.get_debug() or self.is_closed()
        fast = self._tw_fast = None if checked else self._tw_wheel
        # While no check is due, the instance's call_later is the wheel's
        # TimerCore._loop_call_later: one C call, no Python frame (the method
        # below was ~1,400 of ~3,800 instructions of a call_later + cancel).
        # A subclass that overrides call_later keeps its own.  Set and deleted
        # as an attribute, never through self.__dict__: reading __dict__
        # materializes it and un-specializes every attribute load of the
        # loop's own Python (asyncio's loop ran an echo 14 % slower).
        cls = type(self)
        for name, own in (
            ("call_later", _TickwheelLoop.call_later),
            ("call_at", _TickwheelLoop.call_at),
        ):
            if fast is not None and getattr(cls, name) is own:
                _set_attr(self, name, getattr(fast, f"_loop_{name}"))
            else:
                _drop_attr(self, name)

    # -- state ----------------------------------------------------------------
    def set_debug(self, enabled: bool) -> None:
        super().set_debug(enabled)
        if getattr(self, "_tw_wheel", None) is not None:  # not in the base __init__
            self._tw_update_guard()

    def close(self) -> None:
        if self.is_running():
            super().close()  # raises "Cannot close a running event loop"
            return
        wheel = self._tw_wheel
        if wheel is not None and not self.is_closed():
            wheel.close()
        super().close()
        self._tw_update_guard()


_set_attr = object.__setattr__


def _drop_attr(loop: _TickwheelLoop, name: str) -> Any:
    """Remove the loop's instance attribute ``name``; return it (None if unset)."""
    try:
        installed = object.__getattribute__(loop, name)
        object.__delattr__(loop, name)
    except AttributeError:
        return None
    return installed


_CLASSES: dict[type[asyncio.AbstractEventLoop], type[_TickwheelLoop]] = {}


def _default_loop_class() -> type[asyncio.AbstractEventLoop]:
    # asyncio.EventLoop (3.13+) is the default policy's loop class; before
    # 3.13 only the policy names it.
    factory = getattr(asyncio, "EventLoop", None) or getattr(
        _PolicyBase, "_loop_factory", None
    )
    if isinstance(factory, type) and issubclass(factory, asyncio.AbstractEventLoop):
        return factory
    return asyncio.SelectorEventLoop  # pragma: no cover (no policy loop class)


def _loop_class(
    loop_class: type[asyncio.AbstractEventLoop] | None,
) -> type[_TickwheelLoop]:
    """The tickwheel subclass of ``loop_class`` (made once per base class)."""
    if loop_class is None:
        loop_class = _default_loop_class()
    elif not (
        isinstance(loop_class, type)
        and issubclass(loop_class, asyncio.AbstractEventLoop)
    ):
        raise TypeError(
            "loop_class must be an asyncio.AbstractEventLoop subclass (e.g. "
            f"uvloop.Loop) or None, got {loop_class!r}"
        )
    if issubclass(loop_class, _TickwheelLoop):
        return loop_class
    cls = _CLASSES.get(loop_class)
    if cls is None:
        name = f"Tickwheel{loop_class.__name__.lstrip('_')}"
        attrs: dict[str, object] = {"__module__": __name__}
        if _layer._reads_cached_clock(loop_class):
            # One clock for call_later, call_at and time(): the fresh one the
            # wheel reads, so call_later(d) and call_at(loop.time() + d) keep
            # their order and no callback sees time() below its when()
            # (docs/dropins.md, "The tickwheel event loop").
            attrs["time"] = staticmethod(_monotonic)
            attrs["_tw_base_time"] = staticmethod(loop_class.time)
        cls = cast(
            "type[_TickwheelLoop]",
            type(name, (_TickwheelLoop, loop_class), attrs),
        )
        cls.__doc__ = (
            f"{loop_class.__module__}.{loop_class.__qualname__} with call_later "
            "and call_at on a tickwheel TimerWheel."
        )
        _CLASSES[loop_class] = cls
    return cls


def new_event_loop(
    loop_class: type[asyncio.AbstractEventLoop] | None = None,
) -> asyncio.AbstractEventLoop:
    """A new event loop whose ``call_later``/``call_at`` use its TimerWheel.

    The loop is an instance of a subclass of ``loop_class`` (default:
    asyncio's default loop class; or e.g. ``uvloop.Loop``), so everything
    built on those two methods (``asyncio.sleep``, ``wait_for``, ``timeout``,
    libraries' timers) runs on the wheel; everything else is the base loop's.
    Usable as ``loop_factory`` (``asyncio.run(main(), loop_factory=...)``).

    :param loop_class: the base event loop class, or None
    :return: the new loop (not set as the current loop)
    :raises TypeError: if ``loop_class`` is not an AbstractEventLoop subclass
    """
    return _loop_class(loop_class)()


def run(
    main: Coroutine[Any, Any, _T],
    *,
    debug: bool | None = None,
    loop_class: type[asyncio.AbstractEventLoop] | None = None,
) -> _T:
    """``asyncio.run(main)`` on a new tickwheel event loop (like ``uvloop.run``).

    :param main: the coroutine to run
    :param debug: the loop's debug mode (None: asyncio's default)
    :param loop_class: the base event loop class (see :func:`new_event_loop`)
    :return: what ``main`` returns
    :raises TypeError: if ``loop_class`` is not an AbstractEventLoop subclass
    :raises ValueError: if ``main`` is not a coroutine
    :raises RuntimeError: if called from a running event loop
    """
    factory = functools.partial(new_event_loop, _loop_class(loop_class))
    if _get_running_loop() is not None:
        raise RuntimeError("asyncio.run() cannot be called from a running event loop")
    if not _iscoroutine(main):
        raise ValueError(f"a coroutine was expected, got {main!r}")
    if sys.version_info >= (3, 11):
        with asyncio.Runner(debug=debug, loop_factory=factory) as runner:
            return runner.run(main)
    return _run_legacy(main, debug, factory)  # pragma: no cover (3.10)


def _run_legacy(
    main: Coroutine[Any, Any, _T],
    debug: bool | None,
    factory: Callable[[], asyncio.AbstractEventLoop],
) -> _T:
    """asyncio.run of 3.10 with a loop factory (as uvloop.run does there)."""
    from asyncio.runners import _cancel_all_tasks  # type: ignore[attr-defined]

    loop = factory()
    try:
        asyncio.set_event_loop(loop)
        if debug is not None:
            loop.set_debug(debug)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


# The platform's default policy class.  3.14 deprecates the public name
# (asyncio.DefaultEventLoopPolicy warns) and keeps the class as a private one;
# 3.16 removes policies, and with them EventLoopPolicy (nothing here may
# need a policy class then).
if sys.platform == "win32":  # pragma: no cover
    from asyncio import windows_events as _platform_events
else:
    from asyncio import unix_events as _platform_events
_PolicyBase: Any = getattr(_platform_events, "_DefaultEventLoopPolicy", None)
if _PolicyBase is None and sys.version_info < (3, 14):
    _PolicyBase = _platform_events.DefaultEventLoopPolicy
if _PolicyBase is None:  # pragma: no cover (3.16+)
    _PolicyBase = object
    __all__.remove("EventLoopPolicy")


class EventLoopPolicy(_PolicyBase):  # type: ignore[misc]
    """asyncio's default policy, but its new loops are tickwheel event loops.

    ``asyncio.set_event_loop_policy(EventLoopPolicy())`` switches every
    ``asyncio.run``, ``asyncio.new_event_loop`` and ``unittest`` async test
    to the wheel.  Event loop policies are deprecated from Python 3.14 and
    removed in 3.16: there, looking this name up in
    :mod:`tickwheel.compat_asyncio` gives the DeprecationWarning that
    ``asyncio.DefaultEventLoopPolicy`` gives, and it is not in ``__all__``.
    Prefer a loop factory: ``asyncio.run(main(), loop_factory=new_event_loop)``,
    ``asyncio.Runner(loop_factory=...)``,
    ``IsolatedAsyncioTestCase.loop_factory`` (3.13+) or :func:`run`.

    :param loop_class: the base event loop class (see :func:`new_event_loop`)
    :raises TypeError: if ``loop_class`` is not an AbstractEventLoop subclass
    """

    def __init__(self, loop_class: type[asyncio.AbstractEventLoop] | None = None):
        super().__init__()
        self._tw_loop_class = _loop_class(loop_class)

    @property
    def loop_class(self) -> type[asyncio.AbstractEventLoop]:
        """The tickwheel loop class this policy's new loops are instances of."""
        return self._tw_loop_class

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return self._tw_loop_class()


if _PolicyBase is object:  # pragma: no cover (3.16+: policies are gone)
    del EventLoopPolicy
