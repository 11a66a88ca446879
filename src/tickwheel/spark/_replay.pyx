"""The replay engine's event loop, compiled (see ``engine.py`` for the design).

``engine._PartitionReplay.run`` is the reference: this module is the same
loop over typed columns, for the fixed-ISR case (no ``replica_lag_max_ms``),
with one or several timeout settings.  It drives the same objects: the
partition's :class:`~tickwheel.kafka.Partition`, one MockTimer and one
:class:`~tickwheel.purgatory.DelayedOperationPurgatory` per setting, and one
``ReplayProduce`` per request and setting, whose completion the purgatory
decides.  What it saves is the interpreter's work around them: the columns
are read as C integers instead of a zip of five lists, and an operation's
ten fields are C stores (``_new_produce``) instead of attribute writes.

It is used only when the purgatory is compiled too (``ReplayProduce`` then
extends the compiled ``_ProduceCore``); otherwise the engine runs its Python
loop, which the pure-Python CI job tests.
"""

cimport cython
from libc.stdint cimport int64_t, uint8_t

from tickwheel._purgatory cimport _ProduceCore, _new_produce

import heapq

cdef object _heappush = heapq.heappush
cdef object _heappop = heapq.heappop


@cython.final
cdef class Recorder:
    """A setting's completion callback: append the outcome to three lists.

    ``Recorder(ids, done_ms, expired)(op)`` appends ``op.request_id``,
    ``op.done_ms`` and ``op.expired``: what ``engine._record`` does, without
    a Python frame per request.
    """

    cdef list _ids
    cdef list _done_ms
    cdef list _expired

    def __init__(self, list ids, list done_ms, list expired):
        self._ids = ids
        self._done_ms = done_ms
        self._expired = expired

    def __call__(self, op):
        cdef _ProduceCore p
        if isinstance(op, _ProduceCore):
            p = <_ProduceCore>op
            self._ids.append(p.request_id)
            self._done_ms.append(p.done_ms)
            self._expired.append(p._op_expired)
        else:
            self._ids.append(op.request_id)
            self._done_ms.append(op.done_ms)
            self._expired.append(op.expired)


@cython.boundscheck(False)
@cython.wraparound(False)
def run_fixed_isr(
    object replay,
    type produce_type,
    const int64_t[::1] ts,
    const uint8_t[::1] is_fetch,
    const int64_t[::1] first,
    const int64_t[::1] second,
    const int64_t[::1] timeouts,
):
    """Replay the events in order: ``_PartitionReplay.run`` for a fixed ISR.

    Columns as ``run``'s: ``first`` is the replica (fetch) or request_id
    (produce), ``second`` the fetch_offset or required_offset, ``timeouts``
    the row's timeout_ms (produce).  ``produce_type`` is the operation class
    (a ``_ProduceCore`` subclass).
    """
    cdef Py_ssize_t n = ts.shape[0]
    if not (is_fetch.shape[0] == first.shape[0] == second.shape[0]
            == timeouts.shape[0] == n):
        raise ValueError("the five columns must have the same length")
    if not issubclass(produce_type, _ProduceCore):
        raise TypeError(
            f"produce_type must be a _ProduceCore subclass, got {produce_type!r}"
        )
    if replay.isr_timer is not None:
        raise ValueError("run_fixed_isr replays a fixed ISR (no lag timers)")
    part = replay.partition
    cdef dict leos = part.leos
    isr = part.isr
    cdef Py_ssize_t n_followers = len(leos)
    cdef list heap = replay.heap
    cdef list settings = replay.settings
    cdef Py_ssize_t n_settings = len(settings)
    cdef Py_ssize_t k, i
    cdef list timers = [s.timer for s in settings]
    cdef list watches = [s.purgatory.try_complete_else_watch for s in settings]
    cdef list checks = [s.purgatory.check_and_complete for s in settings]
    cdef list clocks = [s.clock for s in settings]
    cdef list records = [s.record for s in settings]
    cdef list fixed = [s.timeout_ms for s in settings]
    cdef bint check = replay.check
    cdef list samples = replay.samples
    name = replay.name
    keys = (name,)
    cdef int64_t now = replay.now
    cdef int64_t leader_leo = part.leader_leo
    cdef int64_t t, a, b
    cdef bint waiting
    cdef _ProduceCore op
    for i in range(n):
        t = ts[i]
        if t != now:
            # Every clock to t (MockTimer.advance_to), or, with nothing due
            # by t, only the manual clock: all advance_to would do.
            for k in range(n_settings):
                timer = timers[k]
                nxt = timer.next_expiration_ms
                if nxt is not None and nxt <= t:
                    timer.advance_to(t)
                else:
                    timer.now_ns = t * 1_000_000
            replay.now = t
            now = t
        a = first[i]
        b = second[i]
        if is_fetch[i]:
            # a = replica, b = fetch_offset
            replica = a
            leos[replica] = b
            # The HW can only have risen past heap[0] if this follower did.
            if heap and b >= <int64_t>heap[0] and replica in isr:
                hw = min(leos.values()) if len(isr) == n_followers else replay._hw()
                if hw >= heap[0]:
                    # _complete_up_to(hw)
                    while heap and heap[0] <= hw:
                        _heappop(heap)
                    for k in range(n_settings):
                        checks[k](name)
        else:
            # a = request_id, b = required_offset
            if b > leader_leo:
                leader_leo = b
                part.leader_leo = b
            required = b
            waiting = False
            for k in range(n_settings):
                timeout = timeouts[i] if fixed[k] is None else fixed[k]
                op = _new_produce(
                    produce_type, part, required, timeout, t, a, clocks[k], records[k]
                )
                if not watches[k](op, keys):
                    # Still waiting (or expired at once, timeout 0: then the
                    # offset is popped later and checks nothing).
                    waiting = True
            if waiting:
                _heappush(heap, required)
        if check and (i == n - 1 or ts[i + 1] != t):
            samples.append((t, [s.purgatory.delayed for s in settings]))
    replay.now = now
