"""The purgatory's steady state under callgrind: instructions per request.

Each request is an operation (``bench_purgatory.FakeOperation``'s shape)
watched under one of 64 keys with a 60 s timeout, so none expires; the
request made 64 requests earlier becomes completable and its key is checked
(``check_and_complete`` tries every operation watching it).  That is
``bench/bench_purgatory.py``'s early-completion path (about 90% of its
requests) without threads or a clock-paced driver: watch, lock, complete,
cancel the timer node.  The purgatory owns a SystemTimer without a reaper.
Run it under callgrind at two sizes and difference the totals (fixed costs
cancel)::

    for n in 50000 100000; do
      valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.purg.$n \\
        python bench/callgrind_purgatory.py $n 2>&1 | grep refs
    done

``python bench/callgrind_purgatory.py N countdown`` runs the same requests
as :class:`tickwheel.CountdownOperation` (count 1, no callback): the
compiled operation, no Python frame per try.

``--kafka`` runs ``bench/bench_purgatory.py``'s workload instead, on a
virtual clock: 3 keys of 100 per request, log-normal time to completion
(median 2 ms, 90 % within the 20 ms timeout), 500 requests per
millisecond (the saturated run's pace, so the watcher lists are as long,
dozens a key), a MockTimer advanced every millisecond (the expiries run
inline), and the purge every ``purge_interval`` completions.  The driver's
own Python (its completion heap) is in the totals: compare trees with it,
or read the purgatory's functions inclusive in ``callgrind_annotate``.
``--per-ms 50`` sets the pace to the paced run's 50,000 requests/s
(shorter watcher lists, fewer entries per purge).
"""

from __future__ import annotations

import heapq
import math
import random
import sys
from typing import Any

from tickwheel import MockTimer
from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

try:
    from tickwheel.purgatory import CountdownOperation
except ImportError:  # a tickwheel before it (A/B runs against older trees)
    CountdownOperation = None  # type: ignore[assignment,misc]

KEYS = 64
# --kafka: requests per virtual millisecond, and the pool of pre-drawn
# requests cycled through (fixed, so drawing it cancels in the difference).
PER_MS = 500
POOL = 4096
Z75 = 0.6744897501960817  # 75th and 90th percentiles of N(0, 1)
Z90 = 1.2815515655446004


class Op(DelayedOperation):
    """Completable once marked; counts its completions."""

    __slots__ = ("completable", "key")

    def __init__(self, timeout_ms: int, key: int) -> None:
        super().__init__(timeout_ms)
        self.completable = False
        self.key = key

    def try_complete(self) -> bool:
        return self.completable and self.force_complete()

    def on_complete(self) -> None:
        pass


class FakeOperation(DelayedOperation):
    """bench_purgatory.py's: completable once its event fired; counts outcomes."""

    __slots__ = ("completable", "done", "keys")

    def __init__(self, timeout_ms: int, keys: tuple[str, ...], done: list[int]):
        super().__init__(timeout_ms)
        self.completable = False
        self.keys = keys
        self.done = done

    def try_complete(self) -> bool:
        return self.completable and self.force_complete()

    def on_complete(self) -> None:
        self.done[self.expired] += 1


def kafka(n: int, kind: str, per_ms: int = PER_MS) -> None:
    """``n`` requests of bench_purgatory.py's workload on a virtual clock."""
    rnd = random.Random(1)
    mu, sigma = math.log(2.0), math.log(20 / 2.0) / Z90
    latency = [math.exp(rnd.gauss(mu, sigma)) for _ in range(POOL)]
    names = [f"fakeKey{i}" for i in range(100)]
    keys = [tuple(rnd.sample(names, 3)) for _ in range(POOL)]
    timer = MockTimer()
    purgatory = DelayedOperationPurgatory("cg", timer)
    submit = purgatory.try_complete_else_watch
    check = purgatory.check_and_complete
    done = [0, 0]

    def counted(op: Any) -> None:
        done[op.expired] += 1

    events: list[tuple[float, int, Any]] = []
    countdown = kind == "countdown"
    now = 0.0
    # 40 ms of requests first (the steady state), the same at every n.
    for i in range(n + 40 * per_ms):
        j = i % POOL
        now += 1 / per_ms
        if i % per_ms == 0:
            timer.advance_clock(1)
        while events and events[0][0] <= now:
            _, k, op = heapq.heappop(events)
            if countdown:
                op.count_down()
            else:
                op.completable = True
            check(keys[k][0])
        if countdown:
            op = CountdownOperation(20, counted)
        else:
            op = FakeOperation(20, keys[j], done)
        if latency[j] < 20:
            heapq.heappush(events, (now + latency[j], j, op))
        submit(op, keys[j])
    purgatory.shutdown()


def main() -> None:
    argv = sys.argv[1:]
    per_ms = PER_MS
    if "--per-ms" in argv:
        at = argv.index("--per-ms")
        try:
            per_ms = int(argv[at + 1])
        except (IndexError, ValueError):
            raise SystemExit("--per-ms needs a whole number of requests") from None
        if per_ms < 1:
            raise SystemExit(f"--per-ms must be at least 1, got {per_ms}")
        del argv[at : at + 2]
        if "--kafka" not in argv:
            raise SystemExit("--per-ms sets --kafka's pace: give --kafka too")
    args = [a for a in argv if a != "--kafka"]
    n = int(args[0])
    kind = args[1] if len(args) > 1 else "subclass"
    if kind not in ("subclass", "countdown"):
        raise SystemExit(f"kind must be subclass or countdown, got {kind!r}")
    if kind == "countdown" and CountdownOperation is None:
        raise SystemExit("this tickwheel has no CountdownOperation")
    if "--kafka" in argv:
        kafka(n, kind, per_ms)
        return
    purgatory = DelayedOperationPurgatory("cg", None, reaper=False)
    submit = purgatory.try_complete_else_watch
    check = purgatory.check_and_complete
    if kind == "countdown":
        make = CountdownOperation
        ops: list[CountdownOperation | None] = [None] * KEYS
        for i in range(n):
            slot = i % KEYS
            old = ops[slot]
            if old is not None:
                old.count_down()
                check(slot)
            op = make(60_000, None, 1)
            submit(op, (slot,))
            ops[slot] = op
        purgatory.shutdown()
        return
    window: list[Op | None] = [None] * KEYS
    for i in range(n):
        slot = i % KEYS
        old = window[slot]
        if old is not None:
            old.completable = True
            check(old.key)
        op = Op(60_000, slot)
        submit(op, (slot,))
        window[slot] = op
    purgatory.shutdown()


if __name__ == "__main__":
    main()
