"""The twin's time keeping: the steps of SystemTimer's thread that keeps time.

Mirrors ``_wheel_keeper.pxi``.  The timer's own methods are called through
the instance (``_take_due``, ``precascade``), each taking the twin's lock,
so a subclass or a test may replace them.
"""

from __future__ import annotations

from typing import Any

from .checks import _NS_PER_MS

# A SystemTimer (a TimerCore with the driver's attributes), typed Any here.
_Timer = Any


def _poll_counted(timer: _Timer) -> list[Any]:
    """What is due now, taken; a due bucket counted in ``timer._processed``.

    One clock reading for both the count and the poll: with two, a bucket
    falling due between them (the driver moves a manual clock, or real time
    passes) was polled but not counted, and a drain loop on advance_clock
    stopped with that bucket's cascaded tasks pending.
    """
    now_ns = timer.now_ns
    return _take_counted(timer, now_ns, timer.next_expiration_ms)


def _take_counted(timer: _Timer, now_ns: int, nxt: int | None) -> list[Any]:
    # The poll at now_ns, counted if a bucket is due: ``nxt`` is the next
    # expiration read after that clock reading (the rule above, for both
    # _poll_counted and _keep_time).
    now_ms = now_ns // _NS_PER_MS
    if nxt is not None and nxt <= now_ms:
        timer._processed += 1
    return timer._take_due(now_ms)  # type: ignore[no-any-return]


def _precascade_chunk(timer: _Timer, chunk: int) -> bool:
    """``timer.precascade(chunk)``; True iff it looked at a whole chunk.

    A shorter chunk ended the pass: the caller waits next, rather than
    calling again for nothing.  An error turns early cascading off
    (``timer._cascade_early``: Kafka's way from then on) and is raised for
    the caller to log.
    """
    try:
        return bool(timer.precascade(chunk) >= chunk)
    except BaseException:
        timer._cascade_early = False
        raise


def _keep_time(
    timer: _Timer, handover: Any, chunk: int, idle_ns: int
) -> list[Any] | bool | int | None:
    """One turn of the idle thread keeping time, on one clock reading.

    A bucket is due: the due tasks, taken and counted as
    :func:`_poll_counted` does, if ``handover`` (a lock) can be taken at
    once, else False (another thread is polling: poll after it).  Else, with
    ``chunk`` > 0 and the next bucket ``idle_ns`` or more away, one chunk of
    early cascading (:func:`_precascade_chunk`): 0 after a whole one (more
    may follow: let other threads run, then call again).  Else how long to
    wait, in ns, until the next bucket is due or precascade may find work
    again (``timer.next_precascade_ms``, while ``timer._cascade_early``);
    None if nothing is pending.
    """
    while True:
        now_ns = timer.now_ns
        nxt = timer.next_expiration_ms
        due_in = None if nxt is None else nxt * _NS_PER_MS - now_ns
        if due_in is not None and due_in <= 0:
            if not handover.acquire(False):
                return False
            try:
                return _take_counted(timer, now_ns, nxt)
            finally:
                handover.release()
        if chunk <= 0 or due_in is None or due_in < idle_ns:
            break
        if _precascade_chunk(timer, chunk):
            return 0
        chunk = 0  # the pass ended: time passed, look again, then wait
    if timer._cascade_early:
        at_ms = timer.next_precascade_ms
        if at_ms is not None:
            until = at_ms * _NS_PER_MS - now_ns
            if due_in is None or until < due_in:
                due_in = until
    return due_in
