"""The twin's part of the asyncio loop's paths: _LoopHandle and the layer's hooks.

Mirrors ``_wheel_loop.pxi``.  The compiled ``TimerCore._loop_call_later``
and ``_loop_call_at`` build the handle in C; this twin's hand every call to
the checked ``call_later``/``call_at`` that the asyncio layer registered
with :func:`_use_loop_handles`, which are their Python form.  The core calls
nothing of the layer above it but what was registered here.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from .checks import _MAX_EARLY_NS, _NS_PER_MS
from .task import TimerTask

#: What the asyncio layer registered: "call_later", "call_at" (and "share",
#: which only the compiled paths call).
_LAYER: dict[str, Callable[..., Any]] = {}


class _LoopHandle(TimerTask):
    """The base of the asyncio loop's handles: a TimerTask with asyncio's when().

    ``_when_s`` is the ``when`` a ``call_at`` was given.  It is the answer
    only while the task's deadline is still the one it gave (the first
    nanosecond at or after it); after a postpone, or for a ``call_later``,
    ``when()`` is the exact deadline.  Either way a callback that reads the
    loop's clock never sees it below ``when()``.
    """

    # Unset until a call_at sets it (schedule_as runs TimerTask.__init__).
    __slots__ = ("_when_s",)
    _when_s: float

    def when(self) -> float:
        """The scheduled time in loop-time seconds, as asyncio's ``when()``.

        ``call_at(t).when() == t``; otherwise the exact deadline
        (``deadline_ns / 1e9``).  ``expiration_ms`` is the wheel's tick.
        """
        deadline = self.deadline_ns
        w = getattr(self, "_when_s", 0.0)
        if -9.0e9 < w < 9.0e9:  # NaN fails both
            num, den = w.as_integer_ratio()
            pinned = -((-num * _NS_PER_MS * 1000) // den)  # ceil(w * 10**9), exact
            # A deadline over 4.3 s in the past reads back clamped (deadline_ns).
            if pinned == deadline or (
                self._early_ns == _MAX_EARLY_NS and pinned < deadline
            ):
                return w
        return deadline / 1e9


def _use_loop_handles(
    plain: type,
    with_context: type,
    call_later: Callable[..., Any],
    call_at: Callable[..., Any],
    share: Callable[..., Any],
) -> None:
    """Register the asyncio layer with ``TimerCore._loop_call_later``/``_loop_call_at``.

    ``plain`` and ``with_context`` are the handle types they make (the
    second when the current context holds variables);
    ``call_later(wheel, delay, callback, *args, context=None)`` and
    ``call_at(wheel, when, ...)`` take every call they refuse, to check
    it and raise naming the argument; ``share(wheel, context)`` gives the
    context a new handle keeps.  The core calls nothing of the layer above
    it but these.

    :raises TypeError: if a handle type is not a _LoopHandle subclass, or
        a function is not callable
    """
    for cls in (plain, with_context):
        if not (isinstance(cls, type) and issubclass(cls, _LoopHandle)):
            raise TypeError(f"handle types must be _LoopHandle subclasses, got {cls!r}")
    for fn in (call_later, call_at, share):
        if not callable(fn):
            raise TypeError(
                f"call_later, call_at and share must be callable, got {fn!r}"
            )
    _LAYER.update(call_later=call_later, call_at=call_at, share=share)


def _loop_slow(
    which: str,
    core: object,
    first: float,
    callback: Callable[..., Any],
    args: tuple[Any, ...],
    context: contextvars.Context | None,
) -> Any:
    """``TimerCore._loop_call_later``/``_loop_call_at``: the layer's ``which``."""
    slow = _LAYER.get(which)
    if slow is None:
        raise TypeError(
            f"{type(core).__name__} has no asyncio layer: "
            "_use_loop_handles was not called"
        )
    if context is None:
        return slow(core, first, callback, *args)
    return slow(core, first, callback, *args, context=context)
