"""The twin's delay queue: DelayQueue, the heap of buckets.

Mirrors ``_wheel_queue.pxi``.
"""

from __future__ import annotations

import heapq

from .task import TimerTaskList


class DelayQueue:
    """Buckets ordered by expiration: tells the driver when the next one is due.

    Runtime complexity: O(log b) offer and poll for b queued buckets (b is at
    most levels × wheel_size, about a hundred in practice).
    """

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def offer(self, bucket: TimerTaskList) -> bool:
        """Queue ``bucket`` at its expiration; return True iff it is the new head."""
        expiration = bucket._expiration_ms
        if expiration is None:
            raise ValueError("bucket has no expiration_ms")
        heap = self._heap
        head = heap[0][0] if heap else None
        self._seq += 1
        heapq.heappush(heap, (expiration, self._seq, bucket))
        return head is None or expiration < head

    def peek(self) -> TimerTaskList | None:
        """The bucket due first, or None."""
        return self._heap[0][2] if self._heap else None

    @property
    def next_expiration_ms(self) -> int | None:
        """Expiration of the bucket due first, or None when empty."""
        return self._heap[0][0] if self._heap else None

    def poll(self, now_ms: int) -> TimerTaskList | None:
        """Remove and return the head bucket if it is due at ``now_ms``, else None."""
        heap = self._heap
        if heap and heap[0][0] <= now_ms:
            return heapq.heappop(heap)[2]
        return None

    def _clear(self) -> None:
        self._heap.clear()

    def _check(self) -> None:
        """Raise AssertionError unless the heap is ordered and keys are current."""
        heap = self._heap
        for i, (key, _, bucket) in enumerate(heap):
            if bucket._expiration_ms != key:
                raise AssertionError(f"{bucket!r} queued at {key}")
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap) and heap[child][0] < key:
                    raise AssertionError("heap order violated")
