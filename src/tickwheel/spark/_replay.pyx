# cython: freethreading_compatible=True
"""The replay engine's event loop, compiled (see ``engine.py`` for the design).

``_replay_py.py`` is the readable reference with the same names: this module
is the same loop over typed columns, and ``tests/test_replay_loop.py`` pins
the two together (identical outputs on generated and random traces, with and
without ISR lag, one or several timeout settings).  It drives the same
objects: the partition's :class:`~tickwheel.kafka.Partition`, one MockTimer
and one :class:`~tickwheel.purgatory.DelayedOperationPurgatory` per setting,
the lag timers of ``engine._PartitionReplay``, and one ``ReplayProduce`` per
request and setting, whose completion the purgatory decides.  What it saves
is the interpreter's work around them: the columns are read as C integers
instead of a zip of five lists, an operation's ten fields are C stores
(``_new_produce``) instead of attribute writes, the pending offsets are a C
heap, and without lag timers the clocks move through their C fields.

``engine`` gets it from ``_impl.select("spark._replay")``: it needs the
compiled purgatory (``ReplayProduce`` then extends ``_ProduceCore``), so it is
selected exactly when the extensions are.
"""

cimport cython
from cpython.long cimport PyLong_AsLongLong
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport free, realloc

from tickwheel._kafka cimport _PartitionCore, _ProduceCore, _new_produce
from tickwheel._wheel cimport TimerCore, TimerTaskList, tw_load_u8, tw_store_i64

from functools import partial as _partial


# -- the pending required offsets: a binary min-heap of C integers -----------------
# (_replay_py.OffsetHeap is the same heap as a heapq list of Python ints.)
cdef struct _Heap:
    int64_t *data
    Py_ssize_t size
    Py_ssize_t capacity


cdef inline int _heap_push(_Heap *h, int64_t value) except -1:
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


cdef inline void _heap_pop(_Heap *h) noexcept:
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


__all__ = ["OffsetHeap", "clock", "now_ms", "record", "recorder", "run"]


# Each class docstring (and __init__ docstring) opens with the constructor's
# signature and a "--" line: CPython serves that as __text_signature__
# (inspect.signature, help(), IDEs) and leaves it out of __doc__.
@cython.final
cdef class OffsetHeap:
    """OffsetHeap()
--

    The required offsets still awaited: a min-heap (``push``, ``pop_up_to``)."""

    cdef _Heap heap

    def __cinit__(self):
        self.heap.data = NULL
        self.heap.size = self.heap.capacity = 0

    def __dealloc__(self):
        free(self.heap.data)

    def __len__(self):
        return self.heap.size

    def push(self, int64_t offset):
        """Add ``offset``."""
        _heap_push(&self.heap, offset)

    def smallest(self):
        """The smallest offset (``IndexError`` when empty)."""
        if not self.heap.size:
            raise IndexError("smallest of an empty OffsetHeap")
        return self.heap.data[0]

    def pop_up_to(self, hw):
        """Remove every offset <= ``hw`` (an int, or ``inf`` for all)."""
        while self.heap.size and self.heap.data[0] <= hw:
            _heap_pop(&self.heap)


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
        expired.append(<bint>tw_load_u8(&p._expired))
    else:
        ids.append(op.request_id)
        done_ms.append(op.done_ms)
        expired.append(op.expired)


def now_ms(TimerCore timer):
    """``timer.now_ms`` (what a setting's clock returns)."""
    cdef int64_t ns = timer._now_ns()
    return ns // 1_000_000 if ns >= 0 else -((-ns + 999_999) // 1_000_000)


def recorder(list ids, list done_ms, list expired):
    """A setting's completion callback: ``recorder(ids, done_ms, expired)(op)``
    appends ``op.request_id``, ``op.done_ms`` and ``op.expired`` (a partial
    of :func:`record`: no frame of its own per request)."""
    return _partial(record, ids, done_ms, expired)


def clock(TimerCore timer):
    """``clock(timer)()`` is ``timer.now_ms``: a setting's clock for its operations."""
    return _partial(now_ms, timer)


def run(
    object replay,
    type produce_type,
    const int64_t[::1] ts,
    const uint8_t[::1] is_fetch,
    const int64_t[::1] first,
    const int64_t[::1] second,
    const int64_t[::1] timeouts,
):
    """Replay one partition's events in order (``replay``: a ``_PartitionReplay``).

    Columns: ``first`` is the replica (fetch) or request_id (produce),
    ``second`` the fetch_offset or required_offset, ``timeouts`` the row's
    timeout_ms (produce).  ``produce_type`` is the operation class.
    """
    cdef Py_ssize_t n = ts.shape[0]
    if not (is_fetch.shape[0] == first.shape[0] == second.shape[0]
            == timeouts.shape[0] == n):
        raise ValueError("the five columns must have the same length")
    if not issubclass(produce_type, _ProduceCore):
        raise TypeError(
            f"produce_type must be a _ProduceCore subclass, got {produce_type!r}"
        )
    for s in replay.settings:
        if not (isinstance(s.timer, TimerCore) and (<TimerCore>s.timer)._manual):
            raise TypeError(f"the settings' timers must be MockTimers, got {s.timer!r}")
    part = replay.partition
    if not isinstance(part, _PartitionCore):
        raise TypeError(f"the replay's partition must be a Partition, got {part!r}")
    if not isinstance(replay.heap, OffsetHeap):
        raise TypeError(f"the replay's heap must be an OffsetHeap, got {replay.heap!r}")
    cdef _Loop loop = _Loop(replay, produce_type)
    try:
        loop.run(ts, is_fetch, first, second, timeouts)
    finally:
        # Stored once, at the end, unless lag timers read them as they go.
        replay.now = loop.now
        part.leader_leo = loop.leader_leo


@cython.final
cdef class _Loop:
    """_Loop(replay, produce_type)
--

    One call of :func:`run`: the replay's objects, unpacked once."""

    cdef object replay, part_obj, name, advance_to, follower_changed
    cdef type produce_type
    cdef _PartitionCore part
    cdef _Heap *heap
    cdef OffsetHeap heap_owner
    cdef dict leos
    cdef set isr
    cdef list settings, timers, watches, checks, clocks, records, fixed, samples
    cdef Py_ssize_t n_settings
    cdef tuple keys
    cdef bint check, lag
    cdef public int64_t now, leader_leo

    def __init__(self, replay, type produce_type):
        """__init__($self, replay, produce_type)
--

Initialize self.  See help(type(self)) for accurate signature."""
        settings = replay.settings
        self.replay = replay
        self.produce_type = produce_type
        self.part = self.part_obj = replay.partition
        self.heap_owner = replay.heap
        self.heap = &self.heap_owner.heap
        self.leos = self.part._leos
        self.isr = self.part._isr
        self.settings = settings
        self.n_settings = len(settings)
        self.timers = [s.timer for s in settings]
        self.watches = [s.purgatory.try_complete_else_watch for s in settings]
        self.checks = [s.purgatory.check_and_complete for s in settings]
        self.clocks = [s.clock for s in settings]
        self.records = [s.record for s in settings]
        self.fixed = [s.timeout_ms for s in settings]
        self.samples = replay.samples
        self.check = replay.check
        self.lag = replay.isr_timer is not None
        self.advance_to = replay.advance_to
        self.follower_changed = replay._follower_changed
        self.name = replay.name
        self.keys = (self.name,)
        self.now = replay.now
        self.leader_leo = self.part_obj.leader_leo

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef int run(
        self, const int64_t[::1] ts, const uint8_t[::1] is_fetch,
        const int64_t[::1] first, const int64_t[::1] second,
        const int64_t[::1] timeouts,
    ) except -1:
        cdef Py_ssize_t n = ts.shape[0], i
        cdef int64_t t
        for i in range(n):
            t = ts[i]
            if t != self.now:
                self.clock_to(t)
            if is_fetch[i]:
                self.fetch(first[i], second[i])
            else:
                self.produce(t, first[i], second[i], timeouts[i])
            if self.check and (i == n - 1 or ts[i + 1] != t):
                self.samples.append(
                    (t, [s.purgatory.delayed for s in self.settings])
                )
        return 0

    cdef inline int clock_to(self, int64_t t) except -1:
        """Every clock to ``t``: expirations first, then lag timers (advance_to)."""
        cdef Py_ssize_t k
        cdef TimerCore core
        cdef list queued
        if self.lag:
            self.advance_to(t)
        else:
            # Every clock to t (MockTimer.advance_to) if something is due by
            # t (a task ready, or the first bucket's expiration: what
            # next_expiration_ms reads), else only the manual clock: all
            # advance_to would do.
            for k in range(self.n_settings):
                core = <TimerCore>self.timers[k]
                queued = core._queue._heap
                if core._ready or (
                    queued and (<TimerTaskList>queued[0])._expiration_ms <= t
                ):
                    self.timers[k].advance_to(t)
                else:
                    tw_store_i64(&core._manual_now_ns, t * 1_000_000)
        self.now = t
        return 0

    cdef inline int fetch(self, int64_t replica_id, int64_t fetch_offset) except -1:
        """A follower's LEO moved: the high watermark may rise past awaited offsets."""
        cdef Py_ssize_t k
        cdef int64_t hw = 0
        replica = replica_id
        self.leos[replica] = fetch_offset
        if self.lag:
            self.follower_changed(replica)
            if replica not in self.isr:
                return 0
        # (Without lag timers every follower is in the ISR.)  The smallest
        # in-sync LEO is Partition._acked_to (what try_complete compares),
        # kept here as Partition.record_fetch would, holding the dict's own int.
        smallest = None
        if not self.lag or len(self.isr) == len(self.leos):
            for leo in self.leos.values():
                if smallest is None or PyLong_AsLongLong(leo) < hw:
                    smallest = leo
                    hw = PyLong_AsLongLong(leo)
        else:
            for r in self.isr:
                leo = self.leos[r]
                if smallest is None or PyLong_AsLongLong(leo) < hw:
                    smallest = leo
                    hw = PyLong_AsLongLong(leo)
        self.part._acked_to = smallest
        if self.heap.size and hw >= self.heap.data[0]:
            # engine._PartitionReplay._complete_up_to(hw)
            while self.heap.size and self.heap.data[0] <= hw:
                _heap_pop(self.heap)
            for k in range(self.n_settings):
                self.checks[k](self.name)
        return 0

    cdef inline int produce(
        self, int64_t t, int64_t request_id, int64_t required, int64_t row_timeout
    ) except -1:
        """One request per setting, each watched unless it completes at once."""
        cdef Py_ssize_t k
        cdef bint waiting = False
        cdef _ProduceCore op
        offset = required
        if required > self.leader_leo:
            self.leader_leo = required
            if self.lag:
                # The lag timers compare with the leader's LEO as they go.
                self.part_obj.leader_leo = offset
                for replica in list(self.isr):
                    self.follower_changed(replica)
        for k in range(self.n_settings):
            timeout = row_timeout if self.fixed[k] is None else self.fixed[k]
            op = _new_produce(
                self.produce_type, self.part, offset, timeout, t, request_id,
                self.clocks[k], self.records[k],
            )
            if not self.watches[k](op, self.keys):
                # Still waiting (or expired at once, timeout 0: then the
                # offset is popped later and checks nothing).
                waiting = True
        if waiting:
            _heap_push(self.heap, required)
        return 0
