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
from cpython.long cimport PyLong_AsLongLong
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport free, realloc

from tickwheel._kafka cimport _PartitionCore, _ProduceCore, _new_produce
from tickwheel._wheel cimport TimerCore, TimerTaskList

from functools import partial as _partial


# -- the pending required offsets: a binary min-heap of C integers -----------------
# (engine._PartitionReplay keeps the same heap as a list of Python ints.)
cdef struct _Heap:
    int64_t *data
    Py_ssize_t size
    Py_ssize_t capacity


cdef int _heap_push(_Heap *h, int64_t value) except -1:
    cdef Py_ssize_t i, parent
    cdef int64_t *grown
    if h.size == h.capacity:
        grown = <int64_t *>realloc(h.data, (2 * h.capacity + 64) * sizeof(int64_t))
        if grown is NULL:
            raise MemoryError()
        h.data = grown
        h.capacity = 2 * h.capacity + 64
    i = h.size
    h.size += 1
    while i > 0:
        parent = (i - 1) >> 1
        if h.data[parent] <= value:
            break
        h.data[i] = h.data[parent]
        i = parent
    h.data[i] = value
    return 0


cdef void _heap_pop(_Heap *h) noexcept:
    # Remove the smallest (h.size > 0).
    cdef Py_ssize_t i = 0, child
    cdef int64_t last
    h.size -= 1
    if h.size == 0:
        return
    last = h.data[h.size]
    while True:
        child = 2 * i + 1
        if child >= h.size:
            break
        if child + 1 < h.size and h.data[child + 1] < h.data[child]:
            child += 1
        if last <= h.data[child]:
            break
        h.data[i] = h.data[child]
        i = child
    h.data[i] = last


# -- the settings' completion callback and clock -------------------------------
# Each is a functools.partial of a module function: both calls are vectorcalls
# (an extension type's __call__ would pack its arguments into a tuple).
def record(list ids, list done_ms, list expired, op):
    """Append ``op.request_id``, ``op.done_ms`` and ``op.expired`` to the lists."""
    cdef _ProduceCore p
    if isinstance(op, _ProduceCore):
        p = <_ProduceCore>op
        ids.append(p.request_id)
        done_ms.append(p.done_ms)
        expired.append(p._op_expired)
    else:
        ids.append(op.request_id)
        done_ms.append(op.done_ms)
        expired.append(op.expired)


def now_ms(TimerCore timer):
    """``timer.now_ms``, read from the compiled core's field."""
    cdef int64_t ns = timer._now_ns()
    return ns // 1_000_000 if ns >= 0 else -((-ns + 999_999) // 1_000_000)


def recorder(list ids, list done_ms, list expired):
    """A setting's completion callback: ``recorder(ids, done_ms, expired)(op)``
    appends ``op.request_id``, ``op.done_ms`` and ``op.expired`` (what
    ``engine._record`` does, without a Python frame per request)."""
    return _partial(record, ids, done_ms, expired)


def clock(TimerCore timer):
    """``clock(timer)()`` is ``timer.now_ms``: a setting's clock for its operations."""
    return _partial(now_ms, timer)


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
    for s in replay.settings:
        if not (isinstance(s.timer, TimerCore) and (<TimerCore>s.timer)._manual):
            raise TypeError(f"the settings' timers must be MockTimers, got {s.timer!r}")
    part = replay.partition
    if not isinstance(part, _PartitionCore):
        raise TypeError(f"the replay's partition must be a Partition, got {part!r}")
    cdef dict leos = part._leos
    if part._isr != leos.keys():
        # The loop takes the HW as the smallest LEO of all followers.
        raise ValueError("run_fixed_isr replays a fixed ISR: every follower in it")
    if replay.heap:
        raise ValueError("run_fixed_isr starts a replay: the partition's heap is not empty")
    cdef list settings = replay.settings
    cdef Py_ssize_t n_settings = len(settings)
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
    cdef _Heap heap
    heap.data = NULL
    heap.size = heap.capacity = 0
    try:
        _run(replay, produce_type, ts, is_fetch, first, second, timeouts, &heap,
             part, leos, settings, n_settings, timers, watches, checks, clocks,
             records, fixed, check, samples, name, keys, &now, &leader_leo)
    finally:
        free(heap.data)
        # Stored once, at the end: nothing reads them during a fixed-ISR
        # replay (the Python loop stores them as it goes).
        replay.now = now
        part.leader_leo = leader_leo


@cython.boundscheck(False)
@cython.wraparound(False)
cdef int _run(
    object replay, type produce_type, const int64_t[::1] ts,
    const uint8_t[::1] is_fetch, const int64_t[::1] first,
    const int64_t[::1] second, const int64_t[::1] timeouts, _Heap *heap,
    _PartitionCore part, dict leos, list settings, Py_ssize_t n_settings,
    list timers, list watches, list checks, list clocks, list records,
    list fixed, bint check, list samples, object name, tuple keys,
    int64_t *now, int64_t *leader_leo,
) except -1:
    cdef Py_ssize_t n = ts.shape[0], i, k
    cdef int64_t t, a, b, hw
    cdef bint waiting
    cdef _ProduceCore op
    cdef TimerCore core
    cdef list queued
    for i in range(n):
        t = ts[i]
        if t != now[0]:
            # Every clock to t (MockTimer.advance_to) if something is due by
            # t (a task ready, or the first bucket's expiration: what
            # next_expiration_ms reads), else only the manual clock: all
            # advance_to would do.
            for k in range(n_settings):
                core = <TimerCore>timers[k]
                queued = core._queue._heap
                if core._ready or (
                    queued and (<TimerTaskList>queued[0])._expiration_ms <= t
                ):
                    timers[k].advance_to(t)
                else:
                    core._manual_now_ns = t * 1_000_000
            now[0] = t
        a = first[i]
        b = second[i]
        if is_fetch[i]:
            # a = replica, b = fetch_offset
            replica = a
            leos[replica] = b
            # With a fixed ISR every follower is in it: the smallest LEO is
            # Partition._acked_to (what try_complete compares), kept here as
            # Partition.record_fetch would, holding the dict's own int.
            smallest = None
            hw = 0
            for leo in leos.values():
                if smallest is None or PyLong_AsLongLong(leo) < hw:
                    smallest = leo
                    hw = PyLong_AsLongLong(leo)
            part._acked_to = smallest
            if heap.size and hw >= heap.data[0]:
                # _complete_up_to(hw)
                while heap.size and heap.data[0] <= hw:
                    _heap_pop(heap)
                for k in range(n_settings):
                    checks[k](name)
        else:
            # a = request_id, b = required_offset
            if b > leader_leo[0]:
                leader_leo[0] = b
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
                _heap_push(heap, b)
        if check and (i == n - 1 or ts[i + 1] != t):
            samples.append((t, [s.purgatory.delayed for s in settings]))
    return 0
