# _wheel_lanes.pxi: included by _wheel.pyx (one extension module).
# Lanes (free threading): a timer split in per-thread cores, each with
# its own lock (_make_lanes, _Lane); add() through the locks
# (_add_guarded, _timer_add), _timer_len.
# Calls: place (_add), ring (_lock_task).

# -- lanes (TimerCore._use_lanes; the lock protocol: _wheel.pxd, "Lanes") -----

cdef inline TimerCore _thread_lane(TimerCore self):
    # The lane this thread's new tasks go to: ``self`` unless laned.
    if self._lanes is None:
        return self
    cdef Py_ssize_t k = tw_thread_lane() % self._nlanes
    if k == 0:
        return self
    return <TimerCore>self._lanes[k]


cdef Py_ssize_t _lane_index(TimerCore self, TaskCounter counter) noexcept:
    # Which lane of this timer counts with ``counter`` (0 unless laned), or -1.
    cdef Py_ssize_t i
    if counter is self._counter:
        return 0
    for i in range(1, self._nlanes):
        if (<TimerCore>self._lanes[i])._counter is counter:
            return i
    return -1


cdef TimerCore _lane_holding(TimerCore self, TaskCounter counter):
    # The lane of this timer whose count is ``counter``, or None.
    cdef Py_ssize_t i = _lane_index(self, counter)
    if i < 0:
        return None
    return self if i == 0 else <TimerCore>self._lanes[i]


cdef list _cores(TimerCore self):
    # Every lane, lane 0 (``self``) first; just ``[self]`` unless laned.
    cdef list cores = [self]
    if self._lanes is not None:
        cores.extend(self._lanes[1:])
    return cores


cdef object _add_guarded(TimerCore self, TimerTask task, int64_t delay_ns):
    # add() on a free-threaded build, or on a laned timer.  A task in a
    # bucket is moved under the lock of that bucket's timer (or lane), taken
    # through the bucket as cancel() takes it: a task pending in another
    # timer is refused there, never read while that timer moves it.  A task
    # in no bucket goes to this thread's lane (this timer, unless laned),
    # placed while holding its claim (_wheel.pxd, "Lanes"), so that two
    # threads adding one task, to one timer or two, take turns.
    cdef TimerCore core
    cdef PyObject *b
    cdef unsigned char state
    cdef bint claimed
    while True:
        claimed = False
        b = _lock_task(task)
        if b is not NULL:
            core = _lane_holding(self, (<TimerTaskList>b)._counter)
            if core is not None:
                try:  # ours: moved within its lane, whose lock is held
                    wake = _add(core, task, core._now_ns(), delay_ns, False)
                finally:
                    tw_unlock(&core._counter._mu)
                break
            state = _state_of(task)
            tw_unlock(&(<TimerTaskList>b)._counter._mu)
            if state == PENDING or state == EXPIRED:
                raise ValueError(f"{task!r} is pending in another timer")
            # Linked by hand in a bucket no timer owns (TimerTaskList.add).
            core = _thread_lane(self)
            tw_lock(&core._counter._mu)
        else:
            if not tw_cas_u8(&task._claim, 0, 1):
                tw_cpu_pause()  # another thread is placing it
                continue
            claimed = True
            core = _thread_lane(self)
            tw_lock(&core._counter._mu)
            if _list_of(task) != <PyObject *>None:
                # Placed by a claim released just before ours: look again.
                tw_unlock(&core._counter._mu)
                tw_store_u8(&task._claim, 0)
                continue
        try:
            wake = _add(core, task, core._now_ns(), delay_ns, False)
        finally:
            tw_unlock(&core._counter._mu)
            if claimed:
                tw_store_u8(&task._claim, 0)
        break
    if wake:
        self._on_wake()


cdef int _timer_add(TimerCore self, TimerTask t) except -1:
    # TimerCore.add's body after the type check; the compiled purgatory
    # calls it directly for a timer whose class keeps TimerCore's add.
    cdef int64_t delay_ns
    if t._delay_is_int:
        delay_ns = (<int64_t>t._delay_ms) * NS_PER_MS
    else:
        delay_ns = <int64_t>ceil(t._delay_ms * <double>NS_PER_MS)
    if TW_FT_LOCKS or self._lanes is not None:
        _add_guarded(self, t, delay_ns)
    elif _add(self, t, self._now_ns(), delay_ns, False):
        self._on_wake()
    return 0


cdef Py_ssize_t _timer_len(TimerCore self) noexcept:
    # len(timer) (TimerCore.__len__), for the compiled purgatory.
    cdef Py_ssize_t total, i
    total = tw_atomic_load_ssize(&self._counter.value)
    if self._lanes is not None:
        for i in range(1, self._nlanes):
            total += tw_atomic_load_ssize(&(<TimerCore>self._lanes[i])._counter.value)
    return total


cdef object _cancel_task(TimerTask task):
    # TimerTask.cancel(), for the compiled purgatory (no attribute lookup).
    return _task_cancel(task)


@cython.final
cdef class _Lane(TimerCore):
    """One lane of a laned timer (TimerCore._use_lanes): a core of its own
    whose wake-ups go to that timer."""

    cdef object _root_ref  # weakref.ref to the laned timer

    def _on_wake(self):
        root = self._root_ref()
        if root is not None:
            root._on_wake()


cdef int _make_lanes(TimerCore self, Py_ssize_t k) except -1:
    # TimerCore._use_lanes(k), ``k`` checked to be >= 1.
    cdef _Lane lane
    if self._manual:
        raise ValueError("a timer with a manual clock has one lane")
    if self._lanes is not None or tw_atomic_load_ssize(&self._counter.value):
        raise ValueError("lanes are for a new timer (no lanes, no tasks yet)")
    if k == 1:
        return 0
    root = _weakref(self)
    lanes = [None]
    for _ in range(1, k):
        lane = _Lane(self._tick_ms, self._wheel._wheel_size,
                     self._wheel._current_time_ms,
                     None if self._fast_clock else self._clock)
        lane._root_ref = root
        lane._closed = self._closed
        lanes.append(lane)
    self._nlanes = k
    self._lanes = tuple(lanes)
    return 0
