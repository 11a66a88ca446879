"""Type stub written by tests/typing/make_stubs.py: do not edit.

Signatures from _asyncio_loop.py, _asyncio_wheel.py
(change them there, then run the script).  The classes are defined here,
in a public module, so that type checkers name them after it:
``tickwheel.compat_asyncio.Timeout``.
"""

import asyncio
import contextvars
import sys
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

from typing_extensions import Self

from ._impl import TimerCore, TimerTask, _LoopHandle

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
if sys.version_info < (3, 14):
    __all__ += ["EventLoopPolicy"]

_PolicyBase: Any

_T = TypeVar("_T")

def new_event_loop(
    loop_class: type[asyncio.AbstractEventLoop] | None = ...,
) -> asyncio.AbstractEventLoop: ...
def run(
    main: Coroutine[Any, Any, _T],
    *,
    debug: bool | None = ...,
    loop_class: type[asyncio.AbstractEventLoop] | None = ...,
) -> _T: ...

class EventLoopPolicy(_PolicyBase):  # type: ignore[misc]
    def __init__(self, loop_class: type[asyncio.AbstractEventLoop] | None = ...): ...
    @property
    def loop_class(self) -> type[asyncio.AbstractEventLoop]: ...
    def new_event_loop(self) -> asyncio.AbstractEventLoop: ...

class TimerHandle(_LoopHandle):
    __slots__ = ()
    def cancelled(self) -> bool: ...  # type: ignore[override]
    def postpone(self, delay: float) -> bool: ...
    def get_context(self) -> contextvars.Context: ...
    def run(self) -> None: ...
    def __repr__(self) -> str: ...

class TimerWheel(TimerCore):
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = ...,
        *,
        tick_ms: int = ...,
        wheel_size: int = ...,
    ) -> None: ...
    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...
    def time(self) -> float: ...
    def call_later(
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = ...,
    ) -> TimerHandle: ...
    def call_at(
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = ...,
    ) -> TimerHandle: ...
    def timeout(self, delay: float | None) -> Timeout: ...
    def timeout_at(self, when: float | None) -> Timeout: ...
    def close(self) -> None: ...
    def __repr__(self) -> str: ...

def get_wheel(loop: asyncio.AbstractEventLoop | None = ...) -> TimerWheel: ...
def call_later(
    delay: float,
    callback: Callable[..., object],
    *args: Any,
    context: contextvars.Context | None = ...,
) -> TimerHandle: ...
def call_at(
    when: float,
    callback: Callable[..., object],
    *args: Any,
    context: contextvars.Context | None = ...,
) -> TimerHandle: ...

class Timeout(TimerTask):
    __slots__ = (
        "_tm_when",
        "_tm_state",
        "_tm_task",
        "_tm_cancelling",
        "_tm_wheel",
        "_tm_soon",
    )
    def __init__(self, when: float | None, wheel: TimerWheel) -> None: ...
    def when(self) -> float | None: ...
    def reschedule(self, when: float | None) -> None: ...
    def postpone(self, delay: float) -> bool: ...
    def expired(self) -> bool: ...
    def run(self) -> None: ...
    def __repr__(self) -> str: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None: ...

def timeout(delay: float | None) -> Timeout: ...
def timeout_at(when: float | None) -> Timeout: ...
