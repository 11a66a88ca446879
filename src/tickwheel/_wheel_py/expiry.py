"""The twin's expiry: polling the due buckets and running expired tasks.

Mirrors ``_wheel_expiry.pxi`` (TimerCore._take_due and _run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .checks import _DONE, _EXPIRED, _LOCK, _NS_PER_MS, _RUNNING
from .levels import TimingWheel, _in_expiration_order
from .place import _expire
from .queue import DelayQueue
from .task import TimerTask

# A TimerCore, typed Any here: the core's module imports this one.
_Core = Any


def _poll(core: _Core, limit: int, step: bool) -> list[TimerTask]:
    """TimerCore._take_due under the lock: every bucket due at ``limit``
    emptied, each task moved down a level or expired, in expiration order."""
    expired: list[TimerTask] = core._ready
    n_ready = len(expired)
    core._ready = []
    queue: DelayQueue = core._queue
    wheel: TimingWheel = core._wheel
    last = None
    while True:
        head = queue.next_expiration_ms
        if head is None or head > limit:
            break
        if step and expired and last is not None and head > last:
            break
        bucket = queue.poll(limit)
        assert bucket is not None
        last = head
        wheel._advance(head)
        root = bucket._root
        node = root._next
        while node is not root:
            assert node is not None
            bucket._unlink(node)
            if not wheel._add(node):
                _expire(core, node)
                expired.append(node)  # type: ignore[arg-type]
            node = root._next
        bucket._expiration_ms = None
    if n_ready and len(expired) > n_ready:
        return _in_expiration_order(expired, n_ready)
    return expired


def _run_tasks(
    core: _Core,
    tasks: Iterable[TimerTask],
    on_error: Callable[[TimerTask, BaseException], Any],
    set_clock: bool,
) -> int:
    """TimerCore._run: each task still expired, run unlocked."""
    ran = 0
    for task in tasks:
        with _LOCK:
            if task._state != _EXPIRED:
                continue
            task._state = _RUNNING
            bucket = task._list
            if bucket is not None:
                bucket._counter.value -= 1
            task._list = None
            if set_clock:
                at = task._expiration_ms * _NS_PER_MS
                if at > core._manual_now_ns:
                    core._manual_now_ns = at
        ran += 1
        try:
            if type(task) is TimerTask:
                fn = task._fn
                if fn is not None:
                    fn(*task._args)
            else:
                task.run()
        except Exception as exc:
            on_error(task, exc)
        finally:
            with _LOCK:
                if task._state == _RUNNING:
                    task._state = _DONE
                    task._release()
    return ran
