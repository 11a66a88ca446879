# _wheel_levels.pxi: included by _wheel.pyx (one extension module).
# The levels: TimingWheel, the level table TimerCore walks (_level_link,
# _wheel_link, _link_in_level, _grow), and the expiry helpers the run and
# poll loops share (_drop_ready, _early_of, _ceil_ms, prefetch).
# Calls: bucket, queue, ring.

@cython.final
@cython.no_gc
cdef class TimingWheel:
    """TimingWheel(tick_ms=1, wheel_size=20, start_ms=0, counter=None, queue=None)
--

    One level of Kafka's hierarchical timing wheel.

    ``wheel_size`` buckets of ``tick_ms`` each cover ``interval_ms``; a later
    deadline goes to the overflow wheel (created on first use), whose tick is
    this wheel's interval.  ``current_time_ms`` is always a multiple of
    ``tick_ms``.  Not thread-safe: a timer serialises access.

    Runtime complexity: add is O(levels); advance_clock is O(levels).

    >>> wheel = TimingWheel(tick_ms=10, wheel_size=5, start_ms=1000)
    >>> wheel.add(TimerTaskEntry(1005)), wheel.add(TimerTaskEntry(1010))
    (False, True)

    :param tick_ms: width of one bucket, >= 1
    :param wheel_size: number of buckets, >= 2
    :param start_ms: initial time, rounded down to a multiple of tick_ms
    :param counter: TaskCounter shared with overflow wheels (new if None)
    :param queue: DelayQueue shared with overflow wheels (new if None)
    :raises ValueError: if tick_ms < 1 or wheel_size < 2
    """

    def __init__(self, tick_ms=DEFAULT_TICK_MS, wheel_size=DEFAULT_WHEEL_SIZE,
                 start_ms=0, TaskCounter counter=None, DelayQueue queue=None):
        """__init__($self, tick_ms=1, wheel_size=20, start_ms=0, counter=None, queue=None)
--

Initialize self.  See help(type(self)) for accurate signature."""
        cdef int64_t tick = _check_positive(tick_ms, "tick_ms", 1)
        cdef int64_t size = _check_positive(wheel_size, "wheel_size", 2)
        cdef int64_t start = _check_time(start_ms, "start_ms")
        if <double>tick * <double>size > 4.611686018427388e18:
            raise OverflowError("tick_ms * wheel_size is too large")
        self._tick_ms = tick
        self._wheel_size = size
        self._interval_ms = tick * size
        self._tick_recip = tw_recip(<uint64_t>tick)
        self._counter = counter if counter is not None else TaskCounter()
        self._queue = queue if queue is not None else DelayQueue()
        self._buckets = [TimerTaskList(self._counter) for _ in range(size)]
        self._current_time_ms = _floordiv(start, tick) * tick
        self._current_index = _floordiv(start, tick) % size

    def __dealloc__(self):
        # Nodes reference their bucket, so without this the rings would
        # keep every bucket (and pending task) alive forever.
        if self._buckets is not None:
            for bucket in self._buckets:
                (<TimerTaskList>bucket)._clear()

    @property
    def tick_ms(self):
        """Width of one bucket."""
        return self._tick_ms

    @property
    def wheel_size(self):
        """Number of buckets."""
        return self._wheel_size

    @property
    def interval_ms(self):
        """tick_ms * wheel_size."""
        return self._interval_ms

    @property
    def current_time_ms(self):
        """The wheel's clock, a multiple of tick_ms."""
        return self._current_time_ms

    @property
    def overflow_wheel(self):
        """The next level up, or None until needed."""
        return self._overflow

    @property
    def counter(self):
        """The shared TaskCounter."""
        return self._counter

    @property
    def queue(self):
        """The shared DelayQueue of buckets."""
        return self._queue

    def bucket(self, Py_ssize_t index):
        """The bucket at ``index`` (0 <= index < wheel_size)."""
        return self._buckets[index]

    def add(self, entry):
        """Link ``entry`` into the bucket for its expiration.

        :return: False if the entry is already due (expiration before
            current_time_ms + tick_ms): the caller must run it instead.
        """
        if not isinstance(entry, TimerTaskEntry):
            raise TypeError(f"entry must be a TimerTaskEntry, got {entry!r}")
        if (<TimerTaskEntry>entry)._next is not NULL:
            raise ValueError(f"{entry!r} is already linked in a bucket")
        return self._add(<TimerTaskEntry>entry)

    @cython.cdivision(True)  # tick_ms >= 1
    cdef bint _add(self, TimerTaskEntry entry) except -1:
        return _wheel_link(self, entry, entry._expiration_ms) != 0

    def advance_clock(self, time_ms):
        """Move current_time_ms forward to ``time_ms`` rounded down to the tick."""
        self._advance(_check_time(time_ms, "time_ms"))

    cdef void _advance(self, int64_t time_ms) noexcept:
        cdef TimingWheel wheel = self
        cdef int64_t virtual_id
        while wheel is not None:
            if time_ms < wheel._current_time_ms + wheel._tick_ms:
                return
            virtual_id = _floordiv(time_ms, wheel._tick_ms)
            wheel._current_time_ms = virtual_id * wheel._tick_ms
            wheel._current_index = virtual_id % wheel._wheel_size
            time_ms = wheel._current_time_ms
            wheel = wheel._overflow

    def levels(self):
        """How many wheels (this one plus overflow wheels) exist."""
        cdef int n = 0
        cdef TimingWheel wheel = self
        while wheel is not None:
            n += 1
            wheel = wheel._overflow
        return n

    cdef Py_ssize_t _linked(self) noexcept:
        cdef Py_ssize_t total = 0
        cdef TimingWheel wheel = self
        while wheel is not None:
            for bucket in wheel._buckets:
                total += (<TimerTaskList>bucket)._size
            wheel = wheel._overflow
        return total

    def _check(self):
        """Raise AssertionError unless every level's buckets hold what they should."""
        cdef TimingWheel wheel = self
        cdef TimingWheel over
        cdef TimerTaskList bucket
        cdef int64_t tick, expiration, e
        queued = {id(b) for b in self._queue._heap}
        while wheel is not None:
            tick = wheel._tick_ms
            if wheel._current_time_ms % tick:
                raise AssertionError("current_time_ms not a multiple of tick_ms")
            if wheel._current_index != _floordiv(wheel._current_time_ms, tick) % wheel._wheel_size:
                raise AssertionError("current_index out of step with current_time_ms")
            if wheel._overflow is not None:
                over = wheel._overflow
                if over._tick_ms != wheel._interval_ms:
                    raise AssertionError("overflow tick must equal the child interval")
                if over._counter is not wheel._counter or over._queue is not wheel._queue:
                    raise AssertionError("overflow wheel must share counter and queue")
            for index in range(wheel._wheel_size):
                bucket = <TimerTaskList>wheel._buckets[index]
                bucket._check()
                if bucket._counter is not wheel._counter:
                    raise AssertionError("bucket counter differs from the wheel's")
                if not bucket._size:
                    continue
                if not bucket._has_expiration or id(bucket) not in queued:
                    raise AssertionError(f"non-empty bucket {index} is not queued")
                expiration = bucket._expiration_ms
                for entry in bucket.entries():
                    e = (<TimerTaskEntry>entry)._expiration_ms
                    if not expiration <= e < expiration + tick:
                        raise AssertionError(
                            f"{entry!r} in slot [{expiration}, {expiration + tick})"
                        )
                    if _floordiv(e, tick) % wheel._wheel_size != index:
                        raise AssertionError(f"{entry!r} in the wrong bucket")
            wheel = wheel._overflow
        self._queue._check()

    def __repr__(self):
        return (
            f"<TimingWheel tick_ms={self._tick_ms} wheel_size={self._wheel_size} "
            f"current_time_ms={self._current_time_ms} levels={self.levels()}>"
        )


# Expiring 10^7 timers is memory-bound: each node, and on free its pymalloc
# pool header, is a cache miss.  The run loop and poll's whole-bucket path
# know the nodes they will touch (a list, an array), so they ask for them a
# few entries ahead.  A prefetch never
# faults; where the compiler lacks the builtin it is a no-op.
cdef extern from "_wheel_inline.h":
    void TW_PREFETCH(PyObject *p) noexcept nogil
    void TW_PREFETCH_PAGE(PyObject *p) noexcept nogil

cdef enum:
    RUN_PREFETCH_AHEAD = 8
    # poll() empties a bucket of at least this many entries with _detach
    # (two pointer chases at once, then prefetching ahead), smaller ones
    # entry by entry.
    DETACH_MIN = 64


cdef inline bint _drop_ready(list ready, TimerTask task) except -1:
    # A due task re-added before it ran leaves the ready list, so it is never
    # listed twice (a stale entry would run it ahead of tasks due before it
    # once it came due again).  Only tasks due when added are listed there.
    cdef Py_ssize_t i = PyList_GET_SIZE(ready)
    while i > 0:
        i -= 1
        if PyList_GET_ITEM(ready, i) == <PyObject *>task:
            del ready[i]
            return True
    return False


_EXPIRATION = operator.attrgetter("expiration_ms")


cdef inline unsigned int _early_of(int64_t expiration_ms, int64_t deadline_ns) noexcept:
    # TimerTask._early_ns: expiration_ms is deadline_ns rounded up, so this
    # is >= 0; a deadline far in the past (a negative delay) is clamped.
    # The LL suffix keeps the bound a C constant: a bare 0xFFFFFFFF is a
    # Python int to Cython, and the comparison then boxed ``early`` into a
    # new int object on every add (~100 instructions per schedule).
    cdef int64_t early = expiration_ms * NS_PER_MS - deadline_ns
    return <unsigned int>early if early < 0xFFFFFFFFLL else 0xFFFFFFFFU


@cython.cdivision(True)
cdef inline int64_t _ceil_ms(int64_t deadline_ns) noexcept nogil:
    # A deadline in ns rounded up to the millisecond (Python's -(-x // M));
    # no addition before the division, which could pass 2**63 at the end
    # of the clock range.
    cdef int64_t q
    if deadline_ns > 0:
        q = deadline_ns / NS_PER_MS
        return q + (deadline_ns - q * NS_PER_MS != 0)
    return -_floordiv(-deadline_ns, NS_PER_MS)


cdef inline int _wheel_link(TimingWheel wheel, TimerTaskEntry entry,
                            int64_t expiration) except -1:
    """Link ``entry`` (expiring at ``expiration``) into the level that holds it.

    0: it is due at the lowest level (nothing linked); 1: linked; 2: linked,
    and its bucket became the queue's head (the driver must wake).  The
    levels are walked through borrowed pointers: every level is owned by
    the one below it (the first by the timer), and nothing here can run
    Python code except allocating a new level (_grow).
    """
    cdef PyObject *w = <PyObject *>wheel
    cdef int64_t tick = wheel._tick_ms
    cdef int64_t current = wheel._current_time_ms
    cdef int64_t offset = expiration - current
    if offset < tick:
        return 0
    # A level's clock is the lowest level's rounded down to its own tick,
    # so its offset is at least this one: every level whose interval this
    # offset reaches is passed over on one comparison each.  The level
    # reached may still be one short (its own offset is larger by less
    # than its tick); the one above it then holds the entry, since a
    # level's interval is wheel_size >= 2 times the one below.
    while True:
        if offset < (<TimingWheel>w)._interval_ms:
            current = (<TimingWheel>w)._current_time_ms
            offset = expiration - current
            if offset < (<TimingWheel>w)._interval_ms:
                break
        if (<TimingWheel>w)._overflow is None:
            _grow(<TimingWheel>w)
        w = <PyObject *>(<TimingWheel>w)._overflow
    return _link_in_level(w, TW_LIST_ITEMS(<PyObject *>(<TimingWheel>w)._buckets),
                          current, offset, entry)


cdef inline int _link_in_level(PyObject *w, PyObject **buckets, int64_t current,
                               int64_t offset, TimerTaskEntry entry) except -1:
    # The end of _wheel_link and _level_link: link ``entry`` into level
    # ``w`` (its clock ``current``, its buckets' items ``buckets``) at
    # ``offset`` ms past that clock, 0 < offset < the level's interval;
    # 1 or 2 as _wheel_link.  Relative to the level's current slot, so no
    # 64-bit signed division and no modulo (bucket = (current slot +
    # slots) mod wheel_size).
    cdef int64_t tick = (<TimingWheel>w)._tick_ms
    cdef int64_t slots, index
    cdef PyObject *b
    if tick == 1:
        slots = offset
    elif offset <= <int64_t>UINT32_MAX:
        # A multiplication instead of a division (~15 cycles that the
        # link waits for): exact below 2**32 (_compat.h).
        slots = <int64_t>tw_div_by_recip(<uint64_t>offset, <uint64_t>tick,
                                         (<TimingWheel>w)._tick_recip)
    else:
        slots = <uint64_t>offset // <uint64_t>tick
    index = (<TimingWheel>w)._current_index + slots
    if index >= (<TimingWheel>w)._wheel_size:
        index -= (<TimingWheel>w)._wheel_size
    b = buckets[index]
    _link_tail(<TimerTaskList>b, entry)
    # The bucket is queued once per time slot: only when its expiration
    # changes does it need a (new) place in the queue.
    if (<TimerTaskList>b)._set_expiration(current + slots * tick):
        return 1 + (<TimingWheel>w)._queue._offer(<TimerTaskList>b)
    return 1


cdef void _levels_refresh(TimerCore core) noexcept:
    # _level_link's table: the levels there are now, up to TW_LEVELS.
    cdef PyObject *w = <PyObject *>core._wheel
    cdef int n = 0
    while w != <PyObject *>None and n < TW_LEVELS:
        core._levels[n] = w
        core._level_buckets[n] = TW_LIST_ITEMS(<PyObject *>(<TimingWheel>w)._buckets)
        n += 1
        w = <PyObject *>(<TimingWheel>w)._overflow
    core._nlevels = n


def _level_table(TimerCore core):
    """(for tests) How many levels ``core.schedule()``'s table holds."""
    return core._nlevels


cdef inline int _level_link(TimerCore core, TimerTaskEntry entry,
                            int64_t expiration) except -1:
    """_wheel_link for schedule(), from the timer's table of levels.

    Same level, bucket and return values as _wheel_link, or 3: not linked,
    because the entry is due at the lowest level or lies beyond the levels
    in the table (the caller then uses _wheel_link and refreshes the
    table).  _wheel_link finds the level by walking up the chain, a
    dependent load and a comparison the CPU mispredicts whenever the level
    changes from one call to the next; here every level's comparison is
    independent of the others and their sum is the level: the first one
    whose interval holds the entry (the test only ever turns true going up:
    see _wheel_link).  That is a few per cent less time on W2-sliding
    (docs/design.md, "What a schedule waits for", has the measurements).
    """
    cdef int n = core._nlevels
    cdef int k = 0
    cdef int i
    cdef PyObject *w
    cdef int64_t current, offset
    for i in range(n):
        w = core._levels[i]
        k += (expiration - (<TimingWheel>w)._current_time_ms
              >= (<TimingWheel>w)._interval_ms)
    if k >= n:
        return 3
    w = core._levels[k]
    current = (<TimingWheel>w)._current_time_ms
    offset = expiration - current
    # (Due at once only at the lowest level: the others' offsets are larger.)
    if offset < (<TimingWheel>w)._tick_ms:
        return 3
    return _link_in_level(w, core._level_buckets[k], current, offset, entry)


cdef int _grow(TimingWheel w) except -1:
    # The overflow level above ``w``, made on first use.
    cdef TimingWheel overflow = TimingWheel(
        w._interval_ms, w._wheel_size, w._current_time_ms, w._counter, w._queue,
    )
    # Allocation may run a GC pass and user finalizers (3.11); one of them
    # could have created the level already.
    if w._overflow is None:
        w._overflow = overflow
    return 0


def _in_expiration_order(list tasks, Py_ssize_t n_ready):
    """The ready tasks (the first ``n_ready``) merged into the polled ones.

    By expiration; on a tie the polled task goes first, because it was added
    earlier: it was not yet due when added, the ready one already was.
    """
    cdef list merged = tasks[n_ready:] + tasks[:n_ready]
    merged.sort(key=_EXPIRATION)
    return merged
