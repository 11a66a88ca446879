# _wheel_core.pxi: included by _wheel.pyx (one extension module).
# The core: TimerCore, the timer's state (clock, wheel, queue, ready list,
# lanes) and its Python API; each method checks its arguments, takes the
# locks, and hands the work to the unit that does it: placement
# (_wheel_place.pxi), expiry (_wheel_expiry.pxi), precascade
# (_wheel_precascade.pxi), lanes (_wheel_lanes.pxi).
# Calls: checks, task, bucket, queue, levels, lanes, place, expiry,
# precascade.

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
        _make_lanes(self, <Py_ssize_t>_check_positive(n, "n", 1))

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
        to :func:`_use_loop_handles`, with the current context (through the
        ``share`` given there) if it holds variables.  Anything else (a
        ``context``, a refused argument, no handle types) goes to the
        ``call_later`` given there, which checks and raises with the
        argument's name.  The loop installs this bound method as its own ``call_later``
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
        anything unusual goes to the ``call_at`` given to
        :func:`_use_loop_handles`.

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """

    def _on_wake(self):
        """Hook: a task became ready or an earlier bucket was queued."""

    def _take_ready(self):
        """Remove and return tasks that were already due when added."""
        cdef list fresh = []
        cdef list ready
        if self._lanes is not None:
            return _take_ready_laned(self)
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
                return _poll(self, limit, step)
            finally:
                tw_unlock(&self._counter._mu)
        return _poll(self, limit, step)

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
        return _next_precascade_all(self)

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
        return _precascade_all(self, budget)

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
        return _run_tasks(self, tasks, on_error, set_clock)

    def _check(self):
        """Raise AssertionError unless wheel, queue and counter agree."""
        cdef TimerCore core
        for obj in _cores(self):
            core = <TimerCore>obj
            if TW_FT_LOCKS or self._lanes is not None:
                tw_lock(&core._counter._mu)
            try:
                _check_core(core)
            finally:
                if TW_FT_LOCKS or self._lanes is not None:
                    tw_unlock(&core._counter._mu)


cdef object _check_core(TimerCore core):
    # TimerCore._check on one core, under its lock.
    core._wheel._check()
    expired = sum(1 for t in core._ready if (<TimerTask>t)._state == EXPIRED)
    linked = core._wheel._linked()
    if core._counter.value < linked + expired:
        raise AssertionError(
            f"counter {core._counter.value} < linked {linked} + ready {expired}"
        )
