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
"""

from __future__ import annotations

import sys

from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

KEYS = 64


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


def main() -> None:
    n = int(sys.argv[1])
    purgatory = DelayedOperationPurgatory("cg", None, reaper=False)
    submit = purgatory.try_complete_else_watch
    check = purgatory.check_and_complete
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
