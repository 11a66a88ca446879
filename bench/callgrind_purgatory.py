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
"""

from __future__ import annotations

import sys

from tickwheel.purgatory import DelayedOperation, DelayedOperationPurgatory

try:
    from tickwheel.purgatory import CountdownOperation
except ImportError:  # a tickwheel before it (A/B runs against older trees)
    CountdownOperation = None  # type: ignore[assignment,misc]

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
    kind = sys.argv[2] if len(sys.argv) > 2 else "subclass"
    if kind not in ("subclass", "countdown"):
        raise SystemExit(f"kind must be subclass or countdown, got {kind!r}")
    purgatory = DelayedOperationPurgatory("cg", None, reaper=False)
    submit = purgatory.try_complete_else_watch
    check = purgatory.check_and_complete
    if kind == "countdown":
        if CountdownOperation is None:
            raise SystemExit("this tickwheel has no CountdownOperation")
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
