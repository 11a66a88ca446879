"""The handles of the asyncio wheel: what ``call_later``/``call_at`` return.

A :class:`TimerHandle` is itself the wheel node (a ``TimerTask``), with
asyncio's TimerHandle API; its two subclasses carry the context the callback
runs in (a shared snapshot, or one given as ``context=``).  The wheel that
makes them is in :mod:`tickwheel._asyncio_wheel`.
"""

from __future__ import annotations

import contextvars

from ._asyncio_time import _delay_ms, _task_postpone
from ._impl import TimerTask, _LoopHandle

_Context = contextvars.Context

_task_cancelled = TimerTask.cancelled.__get__


class TimerHandle(_LoopHandle):
    """A pending ``call_later``/``call_at`` callback: asyncio's TimerHandle API.

    Returned by :meth:`TimerWheel.call_later` and :meth:`TimerWheel.call_at`.
    It *is* the wheel node (a :class:`~tickwheel.TimerTask`), so a pending
    timer is a single object.  This base class carries no context: it is used
    when the captured context holds no variables, and the callback runs in a
    fresh empty context (which is what a copy of an empty context is).

    Runtime complexity: cancel() is O(1).
    """

    __slots__ = ()

    def cancelled(self) -> bool:  # type: ignore[override]
        """True if cancel() stopped the callback before it ran."""
        return _task_cancelled(self)  # type: ignore[no-any-return]

    @property
    def _when(self) -> float:
        """asyncio's ``TimerHandle._when``: :meth:`when` (read-only)."""
        return self.when()

    def postpone(self, delay: float) -> bool:
        """Move the pending callback to run ``delay`` seconds from now.

        What a heartbeat or an idle timeout does on every message, without a
        cancel() and a new call_later(): the handle stays the same object.
        ``delay`` is read like call_later's (rounded up to the tick; <= 0
        runs it on the next loop iteration).  asyncio's handles have no
        such method.

        Runtime complexity: O(levels) (an O(1) unlink, then the add).

        :return: True if the callback was pending and now runs ``delay``
            from now; False if it already ran or was cancelled
        :raises TypeError: if ``delay`` is not a number
        :raises ValueError: if ``delay`` is NaN
        """
        try:
            return _task_postpone(self, delay * 1000.0)
        except (TypeError, ValueError, OverflowError):
            # Raise with our argument's name, or clamp as call_later does.
            return _task_postpone(self, _delay_ms(delay, "delay"))

    def get_context(self) -> contextvars.Context:
        """The context the callback runs in (a copy is entered for each run)."""
        return _Context()

    def run(self) -> None:
        """Run the callback in its context (called by the wheel when due)."""
        _Context().run(self.fn, *self.args)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled() else self.state
        return (
            f"<{type(self).__name__} when={self.when()!r} state={state} "
            f"callback={self.fn!r}>"
        )


class _ContextTimerHandle(TimerHandle):
    """A handle whose callback runs in a copy of a (shared) context snapshot."""

    __slots__ = ("_context",)
    _context: contextvars.Context

    def get_context(self) -> contextvars.Context:
        return self._context

    def run(self) -> None:
        # The snapshot may be shared by many handles: each run gets a copy,
        # so a ContextVar.set() in one callback is not seen by another.
        self._context.copy().run(self.fn, *self.args)  # type: ignore[arg-type]


class _ExplicitContextTimerHandle(_ContextTimerHandle):
    """A handle given ``context=``: the callback runs in that very context."""

    __slots__ = ()

    def run(self) -> None:
        self._context.run(self.fn, *self.args)  # type: ignore[arg-type]
