"""What the drop-in model tests share: strategies and the reference timer.

``tests/test_compat_asyncio_model.py`` and ``tests/test_compat_threading_model.py``
check two drop-ins against the same documented contract: a timer's deadline is
the clock when it was added plus its delay in seconds, rounded up to the
millisecond and then to the tick; one already due when added runs at the next
expiry pass; due timers run in deadline order.  :class:`Reference` is that
contract as a heap of ``(due_ns, id)`` plus a dict of pending ids.
"""

from __future__ import annotations

import heapq
import math
import sys
from fractions import Fraction

from hypothesis import strategies as st

from tickwheel import _impl

NS_PER_MS = 1_000_000
START_NS = 1_000 * 10**9
# A delay beyond this is clamped ("about 146 years"): it never comes due here.
LIMIT_MS = _impl.MAX_DELAY_MS - 1

# Delays in seconds that are exact binary fractions, so the drop-ins' float
# arithmetic (seconds * 1000.0 * 1e6, rounded up) is exact and the reference
# can use integers: 2**-20 s steps (sub-millisecond), 2**-10 s steps up to
# 16 s, whole seconds up to a day, and clamped ones.
SECONDS = st.one_of(
    st.integers(-(2**20), 2**16).map(lambda m: m / 2**20),
    st.integers(0, 2**14).map(lambda m: m / 2**10),
    st.integers(0, 86_400).map(float),
    st.sampled_from([0.0, -0.0, 1e10, math.inf]),
)
# What a callback does while it runs: nothing, or cancel another timer.
CHILD_ACTIONS = st.one_of(st.none(), st.tuples(st.just("cancel"), st.integers(0, 999)))
ADVANCES_NS = st.one_of(
    st.just(0),
    st.integers(1, 2 * NS_PER_MS),
    st.integers(0, 100).map(lambda ms: ms * NS_PER_MS),
    st.integers(0, 20_000).map(lambda ms: ms * NS_PER_MS),
)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Reference:
    """Pending timers by due time: a heap plus a dict.

    A timer never comes back once it ran or was cancelled, so heap entries of
    ids no longer pending are just skipped.
    """

    def __init__(self, tick_ms: int, exact: bool = False) -> None:
        self.tick_ms = tick_ms
        # True: a timer is due at its exact deadline, not at its tick's end
        # (the asyncio drop-in on a loop with sub-millisecond timers).
        self.exact = exact
        self.heap: list[tuple[int, int]] = []
        self.pending: dict[int, int] = {}  # id -> due_ns

    def add(self, rid: int, seconds: float, now_ns: int) -> int | None:
        """Register ``rid``, added at ``now_ns``; return its expiration in ms.

        None for a clamped (or infinite) delay: it never comes due here.
        """
        if not -LIMIT_MS <= seconds * 1000.0 <= LIMIT_MS:
            self.pending[rid] = sys.maxsize
            return None
        exact = Fraction(seconds) * 10**9
        deadline_ns = now_ns + ceil_div(exact.numerator, exact.denominator)
        deadline_ms = ceil_div(deadline_ns, NS_PER_MS)
        expiration_ms = ceil_div(deadline_ms, self.tick_ms) * self.tick_ms
        # Already due when added: it runs at the next expiry pass ("now").
        due_ns = max(deadline_ns if self.exact else expiration_ms * NS_PER_MS, now_ns)
        self.pending[rid] = due_ns
        heapq.heappush(self.heap, (due_ns, rid))
        return expiration_ms

    def first_due_ns(self) -> int | None:
        """The earliest due time of a pending id (what may run next)."""
        heap = self.heap
        # Skip ids no longer pending, and entries left by a re-add (postpone).
        while heap and self.pending.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def due(self, now_ns: int) -> list[int]:
        """Ids still pending whose time has come (must be empty after advancing)."""
        return [rid for rid, due_ns in self.pending.items() if due_ns <= now_ns]
