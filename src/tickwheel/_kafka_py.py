"""Pure-Python twin of ``_kafka.pyx``: the hot half of Kafka's DelayedProduce.

``kafka.py`` builds :class:`~tickwheel.kafka.Partition` on ``_PartitionCore``
and :class:`~tickwheel.kafka.DelayedProduce` on ``_ProduceCore``, taking
both from ``tickwheel._impl``, which imports this module or the compiled
``_kafka`` (same names, signatures and docstrings: ``tests/test_twin_parity.py``).
Only what a replayed produce request touches several times lives here:

* ``_PartitionCore._acked_to`` is the smallest log end offset among the
  in-sync followers, kept up to date by ``Partition``;
* ``_ProduceCore`` holds DelayedProduce's fields and its two hooks:
  ``try_complete`` is one comparison (``_acked_to >= required_offset``),
  ``on_complete`` records the outcome and calls the callback;
* ``_new_produce`` creates one with every field set, without ``__init__``
  (the replay engine's one operation per request; the caller validated the
  values).

Worked example: the produce completes once the partition's acknowledged
offset reaches the offset it waits for.

>>> class P(_PartitionCore):
...     pass
>>> part = P(); part._acked_to = 2
>>> class Produce(_ProduceCore):
...     pass
>>> op = _new_produce(Produce, part, 3, 100, 0, "r1", lambda: 7, None)
>>> op.try_complete()
False
>>> part._acked_to = 3
>>> op.try_complete(), op.outcome, op.done_ms
(True, 'completed', 7)

The purgatory knows nothing of this module: it depends on the purgatory
(``_ProduceCore`` extends its ``DelayedOperation``), never the reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._purgatory_py import DelayedOperation, _new_operation

__all__ = ["COMPLETED", "EXPIRED", "REQUEST_TIMED_OUT"]

COMPLETED = "completed"
EXPIRED = "expired"
#: Kafka's error code name for a produce whose acks did not arrive in time.
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"


class _PartitionCore:
    """The one field of Partition that DelayedProduce.try_complete reads."""

    __slots__ = ("_acked_to",)

    _acked_to: int | float


class _ProduceCore(DelayedOperation):
    """The fields and hot methods of DelayedProduce (kafka.py adds the rest)."""

    __slots__ = (
        "partition",
        "required_offset",
        "timeout_ms",
        "arrival_ms",
        "done_ms",
        "outcome",
        "error",
        "request_id",
        "_clock",
        "_callback",
    )

    partition: Any  # a kafka.Partition (or any object with acked(offset))
    required_offset: int
    timeout_ms: int
    arrival_ms: int
    done_ms: int | None
    outcome: str | None
    error: str | None
    request_id: Any
    _clock: Callable[[], int]
    _callback: Callable[[Any], Any] | None

    def try_complete(self) -> bool:
        """Complete iff every in-sync follower's LEO reached required_offset."""
        # Partition.acked, inlined: the purgatory calls this several times
        # per request (before and after watching, then on every check).
        partition = self.partition
        if isinstance(partition, _PartitionCore):
            if partition._acked_to < self.required_offset:
                return False
        elif not partition.acked(self.required_offset):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        """Record the outcome and completion time, then call the callback."""
        self.done_ms = self._clock()
        if self._op_expired:
            self.outcome = EXPIRED
            self.error = REQUEST_TIMED_OUT
        else:
            self.outcome = COMPLETED
        if self._callback is not None:
            self._callback(self)


def _new_produce(
    cls: type[_ProduceCore],
    partition: Any,
    required_offset: int,
    timeout_ms: int,
    arrival_ms: int,
    request_id: Any,
    clock: Callable[[], int],
    callback: Callable[[Any], Any] | None,
) -> _ProduceCore:
    """A new ``cls`` (a _ProduceCore subclass) with every field set, without __init__.

    The caller has validated every value (the replay loop, which creates one
    per request); ``done_ms``, ``outcome`` and ``error`` start as None.

    :raises TypeError: if ``cls`` is not a _ProduceCore subclass
    """
    if not (isinstance(cls, type) and issubclass(cls, _ProduceCore)):
        raise TypeError(f"cls must be a _ProduceCore subclass, got {cls!r}")
    op = _new_operation(cls, timeout_ms)
    op.partition = partition
    op.required_offset = required_offset
    op.timeout_ms = timeout_ms
    op.arrival_ms = arrival_ms
    op.done_ms = None
    op.outcome = None
    op.error = None
    op.request_id = request_id
    op._clock = clock
    op._callback = callback
    return op
