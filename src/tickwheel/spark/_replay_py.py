"""The replay engine's event loop in Python: the reference for ``_replay.pyx``.

``_engine_sim`` picks, through ``_impl.select("spark._replay")``, the
compiled loop when the extensions are in use and this module otherwise
(``TICKWHEEL_NO_EXTENSIONS=1``, PyPy).  Both define the same names, and
``tests/test_replay_loop.py`` runs both on the same traces (several seeds,
one or several timeout settings, with and without ISR lag) and requires
identical outputs, row for row.  Read this one to see what the loop does;
change both together.

One partition's events arrive as five columns, already validated and sorted
by ``(ts_ms, kind)``.  For each event at time ``t``:

1. if ``t`` is new, every clock moves to ``t`` (``_PartitionReplay.advance_to``:
   requests whose deadline is ``t`` expire, then lag timers due at ``t`` fire);
2. a fetch sets the follower's LEO (and, with lag, starts or stops its lag
   timer); if the follower is in the ISR, the high watermark (the smallest
   in-sync LEO) is recomputed, and when it reaches the smallest offset still
   awaited, every setting's purgatory is asked to complete what it can;
3. a produce raises the leader's LEO (with lag, the followers left behind
   start their lag timers) and becomes one ``ReplayProduce`` per timeout
   setting, watched unless it completes (or expires) at once; its offset is
   then awaited.

Worked example: one follower, a request for offset 10 at t=0 and a fetch to
offset 10 at t=8; the request completes at 8.

>>> import numpy as np
>>> from tickwheel.spark import _replay_py
>>> from tickwheel.spark.engine import ReplayProduce, _PartitionReplay
>>> replay = _PartitionReplay("p", [1], [None], None, 0, loop=_replay_py)
>>> cols = [np.array(c) for c in ([0, 8], [0, 1], [7, 1], [10, 10], [100, 0])]
>>> run(replay, ReplayProduce, *cols)
>>> replay.finish()
>>> replay.settings[0].done_ids, replay.settings[0].done_ms
([7], [8])
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tickwheel._impl import _new_produce

if TYPE_CHECKING:
    import numpy as np

    from tickwheel._wheel_py import TimerCore
    from tickwheel.kafka import DelayedProduce

__all__ = ["OffsetHeap", "clock", "now_ms", "record", "recorder", "run"]


class OffsetHeap:
    """The required offsets still awaited: a min-heap (``push``, ``pop_up_to``)."""

    __slots__ = ("_offsets",)

    def __init__(self) -> None:
        self._offsets: list[int] = []

    def __len__(self) -> int:
        return len(self._offsets)

    def push(self, offset: int) -> None:
        """Add ``offset``."""
        heapq.heappush(self._offsets, offset)

    def smallest(self) -> int:
        """The smallest offset (``IndexError`` when empty)."""
        if not self._offsets:
            raise IndexError("smallest of an empty OffsetHeap")
        return int(self._offsets[0])

    def pop_up_to(self, hw: float) -> None:
        """Remove every offset <= ``hw`` (an int, or ``inf`` for all)."""
        offsets = self._offsets
        while offsets and offsets[0] <= hw:
            heapq.heappop(offsets)


# -- the settings' completion callback and clock -------------------------------
def record(
    ids: list[int], done_ms: list[int], expired: list[bool], op: DelayedProduce
) -> None:
    """Append ``op.request_id``, ``op.done_ms`` and ``op.expired`` to the lists."""
    ids.append(op.request_id)
    done_ms.append(op.done_ms)  # type: ignore[arg-type]  # set by on_complete
    expired.append(op.expired)


def now_ms(timer: TimerCore) -> int:
    """``timer.now_ms`` (what a setting's clock returns)."""
    return timer.now_ms


def recorder(
    ids: list[int], done_ms: list[int], expired: list[bool]
) -> Callable[[DelayedProduce], None]:
    """A setting's completion callback: ``recorder(ids, done_ms, expired)(op)``
    appends ``op.request_id``, ``op.done_ms`` and ``op.expired`` (a partial
    of :func:`record`: no frame of its own per request)."""
    return functools.partial(record, ids, done_ms, expired)


def clock(timer: TimerCore) -> Callable[[], int]:
    """``clock(timer)()`` is ``timer.now_ms``: a setting's clock for its operations."""
    if not hasattr(timer, "now_ms"):
        raise TypeError(f"clock needs a timer with now_ms, got {timer!r}")
    # No Python frame per call (one call per completed or expired request).
    return functools.partial(getattr, timer, "now_ms")


# -- the loop ----------------------------------------------------------------------
def run(  # noqa: PLR0913 - the replay, the operation class and five columns
    replay: Any,
    produce_type: type[DelayedProduce],
    ts: np.ndarray,
    is_fetch: np.ndarray,
    first: np.ndarray,
    second: np.ndarray,
    timeouts: np.ndarray,
) -> None:
    """Replay one partition's events in order (``replay``: a ``_PartitionReplay``).

    Columns: ``first`` is the replica (fetch) or request_id (produce),
    ``second`` the fetch_offset or required_offset, ``timeouts`` the row's
    timeout_ms (produce).  ``produce_type`` is the operation class.
    """
    n = len(ts)
    if not len(is_fetch) == len(first) == len(second) == len(timeouts) == n:
        raise ValueError("the five columns must have the same length")
    _Loop(replay, produce_type).run(ts, is_fetch, first, second, timeouts)


class _Loop:
    """One call of :func:`run`: the replay's objects, unpacked once."""

    def __init__(self, replay: Any, produce_type: type[DelayedProduce]) -> None:
        self.replay = replay
        self.produce_type = produce_type
        self.part = part = replay.partition
        # Partition's own containers: the loop writes LEOs without
        # record_fetch's checks (the columns are validated) and keeps the
        # partition's smallest in-sync LEO (_acked_to) up to date itself.
        self.leos: dict[int, int] = part._leos
        self.isr: set[int] = part._isr
        self.heap: OffsetHeap = replay.heap
        self.lag = replay.isr_timer is not None
        self.keys = (replay.name,)
        self.settings = [
            (s.timeout_ms, s.clock, s.record, s.purgatory.try_complete_else_watch)
            for s in replay.settings
        ]

    def run(self, ts: np.ndarray, is_fetch: np.ndarray, first: np.ndarray,
            second: np.ndarray, timeouts: np.ndarray) -> None:  # fmt: skip
        """The events in order: the clock first, then the fetch or produce."""
        replay = self.replay
        advance_to, fetch, produce = replay.advance_to, self.fetch, self.produce
        check, now, last = replay.check, replay.now, len(ts) - 1
        rows = zip(ts.tolist(), is_fetch.tolist(), first.tolist(), second.tolist(),
                   timeouts.tolist())  # fmt: skip
        for i, (t, is_fetch_row, a, b, row_timeout) in enumerate(rows):
            if t != now:
                advance_to(t)
                now = t
            if is_fetch_row:
                fetch(a, b)
            else:
                produce(t, a, b, row_timeout)
            if check and (i == last or ts[i + 1] != t):
                replay.samples.append(
                    (t, [s.purgatory.delayed for s in replay.settings])
                )

    def fetch(self, replica: int, fetch_offset: int) -> None:
        """A follower's LEO moved: the high watermark may rise past awaited offsets."""
        leos, isr = self.leos, self.isr
        leos[replica] = fetch_offset
        if self.lag:
            self.replay._follower_changed(replica)
        if replica in isr:
            hw = (
                min(leos.values())
                if len(isr) == len(leos)
                else min([leos[r] for r in isr])
            )
            self.part._acked_to = hw
            if self.heap and hw >= self.heap.smallest():
                self.replay._complete_up_to(hw)

    def produce(self, t: int, request_id: int, required: int, row_timeout: int) -> None:
        """One request per setting, each watched unless it completes at once."""
        part = self.part
        if required > part.leader_leo:
            part.leader_leo = required
            if self.lag:
                for replica in list(self.isr):
                    self.replay._follower_changed(replica)
        waiting = False
        for fixed_timeout, op_clock, op_record, watch in self.settings:
            timeout = row_timeout if fixed_timeout is None else fixed_timeout
            op = _new_produce(
                self.produce_type,
                part,
                required,
                timeout,
                t,
                request_id,
                op_clock,
                op_record,
            )
            if not watch(op, self.keys):
                # Still waiting (or expired at once, timeout 0: then the
                # offset is popped later and checks nothing).
                waiting = True
        if waiting:
            self.heap.push(required)
