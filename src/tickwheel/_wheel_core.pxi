# _wheel_core.pxi: included by _wheel.pyx (one extension module).
# The core: TimerCore (clock and ms cache, level table, placement of a
# task, poll, precascade, run, checks) and the laned poll.
# Calls: checks, alloc, ring, task, bucket, queue, levels, lanes.

cdef class TimerCore:
    """TimerCore(tick_ms=1, wheel_size=20, start_ms=None, clock=None, manual=False)
--

    The fast part of a timer: wheel, bucket queue, clock, add/cancel/expire.

    SystemTimer and MockTimer subclass it.  Deadlines are computed from the
    clock in nanoseconds and rounded *up* to the tick, so a task is never
    considered due before its deadline (Kafka truncates "now" to the
    millisecond and can fire up to a tick early).

    :param tick_ms: wheel resolution in milliseconds, >= 1
    :param wheel_size: buckets per level, >= 2
    :param start_ms: wheel start (default: now)
    :param clock: a callable returning nanoseconds (default time.monotonic_ns)
    :param manual: drive the clock by hand via now_ns (MockTimer)
    """

    def __init__(self, tick_ms=DEFAULT_TICK_MS, wheel_size=DEFAULT_WHEEL_SIZE,
                 start_ms=None, clock=None, manual=False):
        """__init__($self, tick_ms=1, wheel_size=20, start_ms=None, clock=None, manual=False)
--

Initialize self.  See help(type(self)) for accurate signature."""
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be callable, got {clock!r}")
        self._clock = clock if clock is not None else _monotonic_ns
        self._fast_clock = self._clock is _monotonic_ns
        self._manual = bool(manual)
        cdef int64_t tick = _check_positive(tick_ms, "tick_ms", 1)
        _check_positive(wheel_size, "wheel_size", 2)
        _check_reach(tick, wheel_size)
        if start_ms is None:
            start_ms = 0 if manual else self._now_ns() // NS_PER_MS
        cdef int64_t start = _check_time(start_ms, "start_ms")
        tw_store_i64(&self._manual_now_ns, start * NS_PER_MS)
        self._counter = TaskCounter()
        self._counter._owner = _weakref(self)
        self._queue = DelayQueue()
        self._wheel = TimingWheel(tick, wheel_size, start, self._counter, self._queue)
        self._nlevels = 0  # (_level_link's table: filled on first use)
        self._tick_ms = tick
        # Expired tasks point at this (never linked) bucket so that running or
        # cancelling them can still find the counter.
        self._expired = TimerTaskList(self._counter)
        self._ready = []
        self._closed = False
        self._pc_horizon = -1
        self._nlanes = 1
        self._ms_ceil_ns = INT64_MIN
        self._ms_clock = (not TW_FT_LOCKS and TW_HAVE_C_CLOCK and self._fast_clock
                          and not self._manual and tick == 1)

    @cython.final
    cdef int64_t _now_ns(self) except? -1:
        if self._manual:
            return tw_load_i64(&self._manual_now_ns)
        if TW_HAVE_C_CLOCK and self._fast_clock:
            return tw_monotonic_ns()
        return self._clock()

    @property
    def now_ns(self):
        """The timer's clock in nanoseconds."""
        return self._now_ns()

    @now_ns.setter
    def now_ns(self, value):
        if not self._manual:
            raise AttributeError("now_ns is read-only on a real-time timer")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"now_ns must be an int, got {value!r}")
        if not -(2**62) <= value <= 2**62:
            raise OverflowError(f"now_ns={value!r} is out of range")
        if TW_FT_LOCKS:
            # The runner moves the manual clock under the timer's lock.
            tw_lock(&self._counter._mu)
            tw_store_i64(&self._manual_now_ns, value)
            tw_unlock(&self._counter._mu)
            return
        tw_store_i64(&self._manual_now_ns, value)

    @property
    def now_ms(self):
        """The timer's clock in whole milliseconds (rounded down)."""
        return _floordiv(self._now_ns(), NS_PER_MS)

    @property
    def tick_ms(self):
        """Width of a level-0 bucket, in milliseconds."""
        return self._tick_ms

    @property
    def wheel(self):
        """The level-0 TimingWheel."""
        return self._wheel

    @property
    def closed(self):
        """True after close()."""
        return self._closed

    def _use_lanes(self, n):
        """Split this timer into ``n`` lanes, so threads adding to it share no lock.

        Each lane is a wheel, bucket queue, count and lock of its own.  A
        thread's ``schedule``/``schedule_as`` go to its lane (threads are
        numbered as they first add, lane = number % n), so threads that
        schedule and cancel on one timer touch neither the same lock nor
        the same cache lines.  ``add(task)`` moves a pending task within its
        lane and puts any other in the calling thread's lane (two threads
        adding one task take turns).  A task stays in its lane until
        it runs or is cancelled; polling and the queries (``len``,
        ``next_expiration_ms``, ``cancel_all``, ...) visit every lane, and
        polled tasks come out merged in expiration order (to the tick).
        SystemTimer does this on free-threaded builds
        (docs/freethreading.md); for a new timer with a real-time clock.

        :param n: the number of lanes, >= 1 (1: no lanes)
        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n`` < 1, the timer has a manual clock, or
            it already has lanes or tasks
        """
        cdef Py_ssize_t k = <Py_ssize_t>_check_positive(n, "n", 1)
        cdef _Lane lane
        if self._manual:
            raise ValueError("a timer with a manual clock has one lane")
        if self._lanes is not None or tw_atomic_load_ssize(&self._counter.value):
            raise ValueError("lanes are for a new timer (no lanes, no tasks yet)")
        if k == 1:
            return
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

    @property
    def _lane_count(self):
        """How many lanes the timer has (1 unless split by _use_lanes)."""
        return self._nlanes

    def _lane_of(self, task):
        """The lane ``task`` is pending or expired in (0 unless laned), or None."""
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a TimerTask, got {task!r}")
        cdef PyObject *b = _list_of(<TimerTask>task)
        if b == <PyObject *>None:
            return None
        cdef Py_ssize_t i = _lane_index(self, (<TimerTaskList>b)._counter)
        return i if i >= 0 else None

    def __len__(self):
        # No lock: the count changes only under the timer's lock, by atomic
        # adds, so an atomic read sees a value it had (Kafka's timer.size
        # reads its AtomicInteger the same way).  The purgatory reads it on
        # every watch.  A laned timer sums its lanes' counts.
        return _timer_len(self)

    @property
    def next_expiration_ms(self):
        """When the next bucket is due (ms); now_ms if tasks are ready; None if idle."""
        cdef list heap
        cdef bint ready
        cdef TimerCore core
        if self._lanes is not None:
            ready = False
            best = None
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                if core._ready:
                    ready = True
                heap = core._queue._heap
                head = (<TimerTaskList>heap[0])._expiration_ms if heap else None
                tw_unlock(&core._counter._mu)
                if head is not None and (best is None or head < best):
                    best = head
            return self.now_ms if ready else best
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            ready = len(self._ready) > 0
            heap = self._queue._heap
            head = (<TimerTaskList>heap[0])._expiration_ms if heap else None
            tw_unlock(&self._counter._mu)
            return self.now_ms if ready else head
        if self._ready:
            return self.now_ms
        return self._queue.next_expiration_ms

    def add(self, task):
        """Schedule ``task`` to run ``task.delay_ms`` from now.

        Re-adding a pending task moves it (the count is unchanged).

        Runtime complexity: O(levels).

        :raises TypeError: if ``task`` is not a TimerTask
        :raises RuntimeError: if the timer is closed, or the task is spent
        :raises ValueError: if the task is pending in another timer
        """
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a TimerTask, got {task!r}")
        _timer_add(self, <TimerTask>task)

    # Installed: runs _schedule_fastcall (_wheel_fastcall.pxi),
    # put in the type's dict at import (the table at the end of
    # _wheel.pyx); this def carries the docstring and is never called.
    def schedule(self, delay_ms, fn, /, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` in ``delay_ms`` milliseconds.

        Runtime complexity: O(levels).

        :return: the TimerTask, whose cancel() stops it
        :raises TypeError: if ``fn`` is not callable
        :raises RuntimeError: if the timer is closed
        """

    # Installed: runs _schedule_as_fastcall (_wheel_fastcall.pxi),
    # put in the type's dict at import (the table at the end of
    # _wheel.pyx); this def carries the docstring and is never called.
    def schedule_as(self, task_type, delay_ms, fn, /, *args):
        """Like schedule(), but the task is a new instance of ``task_type``.

        For TimerTask subclasses that add behaviour or slots (e.g. asyncio
        handles): the instance is made without calling ``__init__`` (its
        fields are set as ``TimerTask.__init__`` would) and added in the
        same call.

        Runtime complexity: O(levels).

        :return: the new ``task_type`` instance, already added
        :raises TypeError: if ``task_type`` is not a TimerTask subclass or
            ``fn`` is not callable
        """

    # Installed: runs _loop_call_later_fastcall (_wheel_loop.pxi),
    # put in the type's dict at import (the table at the end of
    # _wheel.pyx); this def carries the docstring and is never called.
    def _loop_call_later(self, delay, callback, *args, context=None):
        """An event loop's ``call_later`` on this wheel (tickwheel's asyncio loop).

        ``delay`` in seconds; the handle is a new instance of the types given
        to :func:`_use_loop_handles`, with the current context (shared
        through ``self._share``) if it holds variables.  Anything else (a
        ``context``, a refused argument, no handle types) goes to
        ``self.call_later``, which checks and raises with the argument's
        name.  The loop installs this bound method as its own ``call_later``
        while no check is due (compiled: one C call, no Python frame).

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """

    # Installed: runs _loop_call_at_fastcall (_wheel_loop.pxi),
    # put in the type's dict at import (the table at the end of
    # _wheel.pyx); this def carries the docstring and is never called.
    def _loop_call_at(self, when, callback, *args, context=None):
        """An event loop's ``call_at`` on this wheel (tickwheel's asyncio loop).

        ``when`` in seconds on the wheel's clock; the handle keeps ``when``
        as its exact deadline.  Like :meth:`_loop_call_later` otherwise:
        anything unusual goes to ``self.call_at``.

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """

    @cython.final
    cdef TimerTask _schedule_as(self, object task_type, object delay_ms, object fn,
                                tuple args):
        cdef TimerTask task
        cdef int64_t delay_ns
        if task_type is TimerTask:
            task = _new_task(fn, args)  # schedule()'s path
        elif tw_keeps_task_new(task_type, TimerTask):
            # No __init__, no **kwargs dict, no Python frame, no tp_new adapter.
            task = <TimerTask>tw_new_instance(task_type)
            task._fn = fn
            task._args = args
        else:
            # A subtype with its own __new__, which may have done anything:
            # the full checks of _add.
            task = <TimerTask>tw_new_instance(task_type)
            delay_ns = _delay_to_ns(delay_ms, task)
            task._fn = fn
            task._args = args
            if TW_FT_LOCKS:
                tw_lock(&self._counter._mu)
                try:
                    wake = self._add(task, delay_ns)
                finally:
                    tw_unlock(&self._counter._mu)
                if wake:
                    self._on_wake()
                return task
            if self._add(task, delay_ns):
                self._on_wake()
            return task
        return self._link_new(task, delay_ms)

    @cython.final
    cdef TimerTask _schedule_new(self, object delay_ms, object fn):
        # schedule(delay_ms, fn), the common call: _schedule_as's TimerTask
        # path with no extra arguments, no task type or argument tuple to
        # pass along (~50 instructions per schedule).
        return self._link_new(_new_task(fn, ()), delay_ms)

    @cython.final
    cdef TimerTask _link_new(self, TimerTask task, object delay_ms):
        # A task made here is idle and holds its callable: _add's checks for
        # a re-added task are skipped.
        cdef int64_t delay_ns = _delay_to_ns(delay_ms, task)
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                wake = self._add_new(task, delay_ns)
            finally:
                tw_unlock(&self._counter._mu)
            if wake:
                self._on_wake()
            return task
        if self._add_new(task, delay_ns):
            self._on_wake()
        return task

    @cython.final
    cdef TimerTask _schedule(self, object delay_ms, object fn, tuple args, dict kwargs):
        if kwargs:
            fn = _partial(fn, *args, **kwargs)
            args = ()
        return self._schedule_as(TimerTask, delay_ms, fn, args)

    @cython.final
    cdef int _add(self, TimerTask task, int64_t delay_ns) except -1:
        # Returns 1 when the driver must wake: the task is ready, or its
        # bucket became the queue's head.
        cdef TimerTaskList owner
        if self._closed:
            raise RuntimeError("timer is closed")
        if task._spent:
            raise RuntimeError(
                f"{task!r} has run or been cancelled and released its callable; "
                "schedule a new task"
            )
        cdef int64_t now_ns = self._now_ns()
        # Refused before anything moves (a re-added task stays put).
        cdef int64_t expiration = self._expiration_for(task, now_ns, delay_ns)
        if task._state == PENDING or task._state == EXPIRED:
            owner = task._list
            if owner is not None and owner._counter is not self._counter:
                raise ValueError(f"{task!r} is pending in another timer")
            if task._state == PENDING:
                if owner is not None and task._next is not NULL:
                    owner._unlink(task)
            else:
                tw_atomic_add_ssize(&self._counter.value, -1)
                _set_list(task, None)
                _drop_ready(self._ready, task)
        task._early_ns = _early_of(expiration, now_ns + delay_ns)
        return self._place(task, now_ns, expiration)

    @cython.final
    cdef int _add_new(self, TimerTask task, int64_t delay_ns) except -1:
        # _add for a task that was just made: idle, and holding its callable.
        if self._closed:
            raise RuntimeError("timer is closed")
        cdef int64_t now_ns = self._now_ns()
        cdef int64_t expiration = self._expiration_for(task, now_ns, delay_ns)
        task._early_ns = _early_of(expiration, now_ns + delay_ns)
        return self._place(task, now_ns, expiration)

    @cython.final
    cdef int _add_at(self, TimerTask task, int64_t now_ns, int64_t deadline_ns) except -1:
        # _add_new for an absolute deadline on the clock read ``now_ns``: the
        # task keeps that exact deadline (asyncio's call_at(when)).
        if self._closed:
            raise RuntimeError("timer is closed")
        cdef int64_t expiration = self._expiration_for(task, now_ns, deadline_ns - now_ns)
        task._early_ns = _early_of(expiration, deadline_ns)
        return self._place(task, now_ns, expiration)

    @cython.final
    cdef inline int64_t _ceil_now_ms(self, int64_t now_ns) noexcept:
        # _ceil_ms(now_ns) for a reading of the C clock, which never goes
        # back: the cached millisecond while the clock is still in it, so
        # that what is computed from it does not wait for the reading (see
        # _schedule_small).  GIL builds only (two fields, no lock).
        if now_ns > self._ms_ceil_ns:
            self._ms_ceil = _ceil_ms(now_ns)
            self._ms_ceil_ns = self._ms_ceil * NS_PER_MS
        return self._ms_ceil

    @cython.final
    @cython.cdivision(True)
    cdef int64_t _expiration_for(self, TimerTask task, int64_t now_ns,
                                 int64_t delay_ns) except? -1:
        # The deadline rounded up to the millisecond, then up to the tick:
        # never early.  For a whole number of ms on the C clock that is the
        # clock's millisecond (rounded up) plus the delay.
        cdef int64_t expiration
        if self._ms_clock and delay_ns > 0 and delay_ns % NS_PER_MS == 0:
            expiration = self._ceil_now_ms(now_ns) + delay_ns / NS_PER_MS
        else:
            expiration = _ceil_ms(now_ns + delay_ns)
            if self._tick_ms != 1:
                expiration = _ceil_to(expiration, self._tick_ms)
        if expiration > C_MAX_EXPIRATION_MS:
            _past_clock_end(task.delay_ms, _floordiv(now_ns, NS_PER_MS))
        return expiration

    @cython.final
    cdef int _place(self, TimerTask task, int64_t now_ns, int64_t expiration) except -1:
        # Link an unlinked task into the wheel, or make it ready if due.
        cdef int placed
        task._expiration_ms = expiration
        tw_store_u8(&task._state, PENDING)
        # "Due" is judged on the timer's clock: the wheel's own clock only
        # moves when a bucket is polled and may lag behind it.
        if expiration * NS_PER_MS > now_ns:
            placed = _wheel_link(self._wheel, task, expiration)
            if placed:
                return placed == 2
        self._expire(task)
        self._ready.append(task)
        return 1

    @cython.final
    cdef void _expire(self, TimerTask task) noexcept:
        tw_store_u8(&task._state, EXPIRED)
        _set_list(task, self._expired)
        tw_atomic_add_ssize(&self._counter.value, 1)

    def _on_wake(self):
        """Hook: a task became ready or an earlier bucket was queued."""

    def _take_ready(self):
        """Remove and return tasks that were already due when added."""
        cdef list fresh = []
        cdef list ready
        cdef TimerCore core
        cdef list keys
        if self._lanes is not None:
            ready = []
            keys = []  # expirations read under each lane's lock (_take_due_laned)
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                ready.extend(core._ready)
                keys.extend([(<TimerTask>t)._expiration_ms for t in core._ready])
                core._ready = []
                tw_unlock(&core._counter._mu)
            if len(ready) > 1:
                ready = [ready[i] for i in sorted(range(len(ready)), key=keys.__getitem__)]
            return ready
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
        ready = self._ready
        self._ready = fresh
        if TW_FT_LOCKS:
            tw_unlock(&self._counter._mu)
        return ready

    def _take_due(self, now_ms, bint step=False):
        """Advance through every bucket due at ``now_ms``; return the expired tasks.

        Tasks come out in expiration order (to the tick).  With ``step=True``
        it stops after the first time slot that expired at least one task,
        so a discrete-event driver can run them before looking further.
        """
        cdef int64_t limit = now_ms
        if self._lanes is not None:
            return _take_due_laned(self, limit, step)
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._poll(limit, step)
            finally:
                tw_unlock(&self._counter._mu)
        return self._poll(limit, step)

    cdef list _poll(self, int64_t limit, bint step):
        cdef list fresh = []
        cdef list expired = self._ready
        cdef list heap = self._queue._heap
        cdef TimingWheel wheel = self._wheel
        cdef TimerTaskList bucket
        cdef TimerTaskEntry node
        cdef int64_t head, last = 0
        cdef bint have_last = False
        cdef Py_ssize_t n, i
        cdef PyObject **nodes
        cdef Py_ssize_t n_ready = len(expired)
        self._ready = fresh
        while heap:
            head = (<TimerTaskList>heap[0])._expiration_ms
            if head > limit:
                break
            if step and have_last and head > last and len(expired):
                break
            bucket = self._queue._pop()
            last = head
            have_last = True
            wheel._advance(head)
            n = bucket._size
            if n < DETACH_MIN:
                while bucket._head != <PyObject *>bucket:
                    node = <TimerTaskEntry>bucket._head
                    bucket._unlink(node)  # `node` keeps it alive
                    if not wheel._add(node):
                        self._expire(<TimerTask>node)
                        expired.append(node)
            else:
                nodes = bucket._detach()
                i = 0
                try:
                    while i < n:
                        if i + RUN_PREFETCH_AHEAD < n:
                            TW_PREFETCH(nodes[i + RUN_PREFETCH_AHEAD])
                        node = <TimerTaskEntry>nodes[i]
                        node._prev = NULL
                        node._next = NULL
                        _set_list(node, None)
                        if not wheel._add(node):
                            self._expire(<TimerTask>node)
                            expired.append(node)
                        nodes[i] = NULL
                        Py_DECREF(node)  # the ring's reference, from _detach
                        i += 1
                except BaseException:
                    # Only a MemoryError from _add (a new wheel level): put
                    # the entries not handled back in the bucket, due again
                    # at the next poll, and keep the expired ones ready.
                    while i < n:
                        node = <TimerTaskEntry>nodes[i]
                        node._prev = NULL
                        node._next = NULL
                        _set_list(node, None)
                        bucket._link(node)
                        nodes[i] = NULL
                        Py_DECREF(node)
                        i += 1
                    self._queue._offer(bucket)
                    expired.extend(self._ready)
                    self._ready = expired
                    raise
                finally:
                    free(nodes)
            bucket._has_expiration = False
        if n_ready and len(expired) > n_ready:
            return _in_expiration_order(expired, n_ready)
        return expired

    @property
    def next_precascade_ms(self):
        """When precascade() may next find work (ms, after now), or None.

        The earliest time later than now at which an overflow bucket's slot
        overlaps the lower level's reach by half (it becomes eligible), or
        the bucket being moved down may be passed over again.  A driver that
        sleeps until the next due bucket should also wake by then, or the
        work waits for the bucket's slot to start (SystemTimer's reaper does).

        Runtime complexity: O(levels x wheel_size).
        """
        cdef TimerCore core
        if self._lanes is not None:
            best = None
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                try:
                    at = core._next_precascade()
                finally:
                    tw_unlock(&core._counter._mu)
                if at is not None and (best is None or at < best):
                    best = at
            return best
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._next_precascade()
            finally:
                tw_unlock(&self._counter._mu)
        return self._next_precascade()

    cdef object _next_precascade(self):
        cdef int64_t now_ms = _floordiv(self._now_ns(), NS_PER_MS)
        cdef TimingWheel lower = self._wheel
        cdef TimingWheel wheel = lower._overflow
        cdef TimerTaskList bucket
        cdef int64_t span, need, at, best = 0
        cdef bint found = False
        while wheel is not None:
            span = wheel._tick_ms
            for obj in wheel._buckets:
                bucket = <TimerTaskList>obj
                if not (bucket._size and bucket._has_expiration):
                    continue
                # precascade's test: 2 * (horizon - expiration) >= span.
                need = bucket._expiration_ms + (span + 1) // 2
                if (bucket is self._pc_bucket
                        and bucket._expiration_ms == self._pc_expiration
                        and self._pc_left <= 0 and self._pc_horizon >= 0):
                    need = max(need, self._pc_horizon + (span // 8 if span >= 8 else 1))
                # The lower level's horizon at t: t to its tick, plus its reach.
                at = _ceil_to(need - lower._interval_ms, lower._tick_ms)
                if at > now_ms and (not found or at < best):
                    best = at
                    found = True
            lower = wheel
            wheel = wheel._overflow
        return best if found else None

    def precascade(self, max_entries=PRECASCADE_CHUNK):
        """Move tasks of the next overflow bucket down a level before it is due.

        Kafka cascades an overflow bucket when its slot starts, all at once:
        a bucket holding 100,000 tasks stalls the driver for milliseconds
        just when its first tasks fall due.  A driver with idle time calls
        this instead, repeatedly, until it returns 0.  Each call looks at up
        to ``max_entries`` tasks of the overflow bucket due soonest among
        those whose slot already overlaps the lower level's reach by at least
        half: a task the lower level can hold moves there now, the others
        go back to their bucket.  One pass visits each task once; a bucket
        is passed over again only after the lower level's reach grew by an
        eighth of the bucket's span, so the work stays bounded.

        Deadlines, order and counts are unchanged: a task only ever moves to
        the bucket it would have reached at its slot's start.  When nothing
        is due, the wheel's clock is first brought up to the timer's.

        Runtime complexity: O(max_entries + levels x wheel_size).

        :param max_entries: the most tasks to look at in this call, >= 1
        :return: how many tasks it looked at (0: nothing to do now)
        :raises TypeError: if ``max_entries`` is not an int
        :raises ValueError: if ``max_entries`` < 1
        """
        cdef Py_ssize_t budget = <Py_ssize_t>_check_positive(max_entries, "max_entries", 1)
        cdef Py_ssize_t looked = 0
        cdef TimerCore core
        if self._lanes is not None:
            # Each lane in turn, within the one budget.
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                try:
                    looked += core._precascade(budget - looked)
                finally:
                    tw_unlock(&core._counter._mu)
                if looked >= budget:
                    break
            return looked
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._precascade(budget)
            finally:
                tw_unlock(&self._counter._mu)
        return self._precascade(budget)

    cdef Py_ssize_t _precascade(self, Py_ssize_t budget) except -1:
        cdef TimingWheel lower = self._wheel
        cdef TimingWheel wheel = lower._overflow
        cdef TimerTaskList bucket, best = None
        cdef int64_t horizon, best_horizon = 0, best_span = 0, step
        cdef TimerTaskEntry node
        cdef Py_ssize_t looked = 0, n
        cdef int64_t now_ms = _floordiv(self._now_ns(), NS_PER_MS)
        cdef list heap = self._queue._heap
        if now_ms > lower._current_time_ms and (
                not heap or (<TimerTaskList>heap[0])._expiration_ms > now_ms):
            # Nothing is due: bring the wheel's clock (which only moves when a
            # bucket is polled) up to the timer's, as a poll at now would.
            lower._advance(now_ms)
        while wheel is not None:
            horizon = lower._current_time_ms + lower._interval_ms
            for obj in wheel._buckets:
                bucket = <TimerTaskList>obj
                if (bucket._size and bucket._has_expiration
                        and (best is None or bucket._expiration_ms < best._expiration_ms)
                        and 2 * (horizon - bucket._expiration_ms) >= wheel._tick_ms):
                    best = bucket
                    best_horizon = horizon
                    best_span = wheel._tick_ms
            lower = wheel
            wheel = wheel._overflow
        if best is None:
            return 0
        if best is not self._pc_bucket or best._expiration_ms != self._pc_expiration:
            self._pc_bucket = best
            self._pc_expiration = best._expiration_ms
            self._pc_left = 0
            self._pc_horizon = -1
        if self._pc_left <= 0:
            step = best_span // 8 if best_span >= 8 else 1
            if self._pc_horizon >= 0 and best_horizon - self._pc_horizon < step:
                return 0
            self._pc_left = best._size
            self._pc_horizon = best_horizon
        n = budget if budget < self._pc_left else self._pc_left
        while looked < n:
            if best._head == <PyObject *>best:
                self._pc_left = 0
                break
            node = <TimerTaskEntry>best._head
            best._unlink(node)
            # Lands lower if it fits, else back at this bucket's tail (the
            # level's clock has not moved, so its slot is the same one).
            if not self._wheel._add(node):
                self._expire(<TimerTask>node)
                self._ready.append(node)
            looked += 1
        self._pc_left -= looked
        return looked

    def cancel_all(self):
        """Cancel every pending task; return how many were cancelled."""
        cdef list tasks = []
        cdef TimingWheel wheel
        cdef TimerCore core
        for obj in _cores(self):
            core = <TimerCore>obj
            if TW_FT_LOCKS:
                tw_lock(&core._counter._mu)
            wheel = core._wheel
            while wheel is not None:
                for bucket in wheel._buckets:
                    tasks.extend((<TimerTaskList>bucket).entries())
                wheel = wheel._overflow
            tasks.extend([t for t in core._ready if (<TimerTask>t)._state == EXPIRED])
            core._ready = []
            if TW_FT_LOCKS:
                tw_unlock(&core._counter._mu)
        cdef int n = 0
        for task in tasks:
            n += task.cancel()
        return n

    def _close_core(self):
        # Every lane refuses adds before any task is cancelled.
        cdef TimerCore core
        for obj in _cores(self):
            core = <TimerCore>obj
            if TW_FT_LOCKS:
                tw_lock(&core._counter._mu)
            core._closed = True
            if TW_FT_LOCKS:
                tw_unlock(&core._counter._mu)
        self.cancel_all()

    def _run(self, tasks, on_error, bint set_clock=False):
        """Run each task still expired (skipping cancelled/re-added ones).

        Exceptions (``Exception`` subclasses) go to ``on_error(task, exc)``;
        others propagate after the task is marked done.  With ``set_clock``
        the manual clock reads each task's expiration while it runs.

        :return: how many tasks ran
        """
        cdef Py_ssize_t ran = 0
        cdef TimerTask task
        cdef TimerTaskList bucket
        cdef int64_t at
        cdef Py_ssize_t i = 0
        cdef bint is_list = type(tasks) is list
        cdef PyObject *ahead
        cdef PyObject *b
        cdef bint laned = self._lanes is not None
        # The lock of the lane the task expired in (this timer's unless laned).
        cdef tw_mutex *mu = &self._counter._mu
        for obj in tasks:
            if is_list:
                # The node a few entries on, and its pool header (pymalloc
                # reads it when the node is freed after running).
                i += 1
                if i + RUN_PREFETCH_AHEAD <= PyList_GET_SIZE(tasks):
                    ahead = PyList_GET_ITEM(tasks, i + RUN_PREFETCH_AHEAD - 1)
                    TW_PREFETCH(ahead)
                    TW_PREFETCH_PAGE(ahead)
            task = <TimerTask?>obj
            if laned:
                # A laned timer: the lock of the lane the task expired in.
                b = _lock_task(task)
                if b is NULL:
                    continue  # in no bucket: cancelled, running or done
                mu = &(<TimerTaskList>b)._counter._mu
                if task._state != EXPIRED:
                    tw_unlock(mu)
                    continue
            elif TW_FT_LOCKS:
                # EXPIRED -> RUNNING under the timer's lock (a cancel() from
                # another thread takes it too); the task runs unlocked.
                tw_lock(mu)
                if task._state != EXPIRED:
                    tw_unlock(mu)
                    continue
            elif task._state != EXPIRED:
                continue
            tw_store_u8(&task._state, RUNNING)
            bucket = task._list
            if bucket is not None:
                tw_atomic_add_ssize(&bucket._counter.value, -1)
            _set_list(task, None)
            if set_clock:
                at = task._expiration_ms * NS_PER_MS
                if at > self._manual_now_ns:
                    tw_store_i64(&self._manual_now_ns, at)
            if TW_FT_LOCKS:
                tw_unlock(mu)
            ran += 1
            try:
                if type(task) is TimerTask:
                    fn = task._fn
                    if fn is not None:
                        fn(*task._args)
                else:
                    task.run()
            except Exception as exc:
                on_error(task, exc)
            finally:
                if TW_FT_LOCKS:
                    # RUNNING -> DONE under the lock; the callable goes after.
                    # (Re-added by its callable, a task may now be in another
                    # lane, under another lock: its state is read atomically,
                    # and only this thread moves a task out of RUNNING.)
                    tw_lock(mu)
                    if _state_of(task) == RUNNING:
                        fn = task._fn
                        held_args = task._args
                        tw_store_u8(&task._state, DONE)
                        _release(task)
                    tw_unlock(mu)
                    fn = None
                    held_args = None
                elif task._state == RUNNING:
                    tw_store_u8(&task._state, DONE)
                    _release(task)
        return ran

    def _check(self):
        """Raise AssertionError unless wheel, queue and counter agree."""
        cdef TimerCore core
        if self._lanes is not None:
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                try:
                    core._check_unlocked()
                finally:
                    tw_unlock(&core._counter._mu)
            return
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._check_unlocked()
            finally:
                tw_unlock(&self._counter._mu)
        return self._check_unlocked()

    cdef object _check_unlocked(self):
        self._wheel._check()
        expired = sum(1 for t in self._ready if (<TimerTask>t)._state == EXPIRED)
        linked = self._wheel._linked()
        if self._counter.value < linked + expired:
            raise AssertionError(
                f"counter {self._counter.value} < linked {linked} + ready {expired}"
            )


cdef list _take_due_laned(TimerCore self, int64_t limit, bint step):
    # TimerCore._take_due on a laned timer: each lane polled under its own
    # lock, their tasks merged by expiration (a stable sort: each lane's own
    # order is kept, as one timer's).  With ``step``: the lanes are polled up
    # to the earliest slot due among them, and on to the next while a slot
    # only moved tasks down a level.
    cdef list cores = _cores(self)
    cdef list out = []
    cdef list keys = []  # each task's expiration, read under its lane's lock
    cdef list part, heap
    cdef TimerCore core
    cdef int64_t upto, head
    cdef Py_ssize_t parts = 0
    while True:
        upto = limit
        if step:
            for obj in cores:
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                heap = core._queue._heap
                if heap:
                    head = (<TimerTaskList>heap[0])._expiration_ms
                    if head < upto:
                        upto = head
                tw_unlock(&core._counter._mu)
        for obj in cores:
            core = <TimerCore>obj
            tw_lock(&core._counter._mu)
            try:
                part = core._poll(upto, step)
                if part:
                    # Under the lock: another thread may postpone one of
                    # these (EXPIRED -> PENDING) as soon as it is released.
                    keys.extend([(<TimerTask>t)._expiration_ms for t in part])
            finally:
                tw_unlock(&core._counter._mu)
            if part:
                out.extend(part)
                parts += 1
        if not step or out or upto >= limit:
            break
    if parts > 1:
        out = [out[i] for i in sorted(range(len(out)), key=keys.__getitem__)]
    return out
