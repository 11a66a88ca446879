# _wheel_task.pxi: included by _wheel.pyx (one extension module).
# The nodes: TaskCounter, TimerTaskEntry, TimerTask (state, cancel,
# postpone).
# Calls: checks, alloc, ring; postpone re-places through _add (place).

# Each class docstring (and __init__ docstring) opens with the constructor's
# signature and a "--" line: CPython serves that as __text_signature__
# (inspect.signature, help(), IDEs) and leaves it out of __doc__.
@cython.final
@cython.no_gc
cdef class TaskCounter:
    """TaskCounter()
--

    A count of tasks shared by every bucket of one timer (Kafka's taskCounter)."""

    def __repr__(self):
        return f"<TaskCounter value={self.value}>"


@cython.no_gc
cdef class TimerTaskEntry:
    """TimerTaskEntry(expiration_ms=0)
--

    A node of a TimerTaskList: an absolute expiration plus prev/next links."""

    def __init__(self, expiration_ms=0):
        """__init__($self, expiration_ms=0)
--

Initialize self.  See help(type(self)) for accurate signature."""
        self._expiration_ms = _check_time(expiration_ms, "expiration_ms")

    @property
    def expiration_ms(self):
        """Absolute expiration on the wheel's clock, in milliseconds."""
        return self._expiration_ms

    @expiration_ms.setter
    def expiration_ms(self, value):
        if self._next is not NULL:
            raise RuntimeError("cannot change expiration_ms of a linked entry")
        self._expiration_ms = _check_time(value, "expiration_ms")

    @property
    def list(self):
        """The bucket this entry is linked in, or None."""
        return self._list if self._next is not NULL else None

    @property
    def task(self):
        """The task this entry schedules: the entry itself for a TimerTask."""
        return self if isinstance(self, TimerTask) else None

    def __repr__(self):
        return f"<{type(self).__name__} expiration_ms={self._expiration_ms}>"


@cython.no_gc
cdef class TimerTask(TimerTaskEntry):
    """TimerTask(delay_ms, fn=None, /, *args, **kwargs)
--

    A task to run once after ``delay_ms`` milliseconds.

    Pass a callable (and its arguments), or subclass and override :meth:`run`.
    A task is its own node in the timer's bucket list, so a pending timer is
    one object.  When a callable-backed task has run or been cancelled, the
    callable and its arguments are released (breaking reference cycles such
    as ``obj._timeout = timer.schedule(5, obj.on_timeout)``), and adding it
    again raises; a subclass that overrides :meth:`run` can be re-added.

    Runtime complexity: O(1) to create and to cancel.

    >>> task = TimerTask(10, print, "hello")
    >>> task.delay_ms, task.pending, task.cancelled
    (10, False, False)

    :param delay_ms: delay in milliseconds (int or float); negative means due
    :param fn: callable to run, or None when a subclass overrides run()
    :raises TypeError: if ``fn`` is not callable or ``delay_ms`` not a number
    :raises ValueError: if ``delay_ms`` is NaN or infinite
    """

    def __init__(self, delay_ms, fn=None, /, *args, **kwargs):
        """__init__($self, delay_ms, fn=None, /, *args, **kwargs)
--

Initialize self.  See help(type(self)) for accurate signature."""
        _delay_to_ns(delay_ms, self)
        if fn is not None and not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        if kwargs:
            if fn is None:
                raise TypeError("keyword arguments need fn")
            fn = _partial(fn, *args, **kwargs)
            args = ()
        self._fn = fn
        self._args = args

    @property
    def delay_ms(self):
        """The delay, in milliseconds, applied each time the task is added."""
        if self._delay_is_int:
            return <long long>self._delay_ms
        return self._delay_ms

    @delay_ms.setter
    def delay_ms(self, value):
        _delay_to_ns(value, self)

    @property
    def deadline_ns(self):
        """The exact deadline on the timer's clock (ns) that the last add computed.

        ``expiration_ms`` is this rounded up to the tick; a driver that wants
        asyncio's order runs one tick's tasks sorted by it (the wheel keeps
        a bucket in the order its tasks were linked, as Kafka does).  It lies
        at most 2**32 - 1 ns (about 4.3 s) before ``expiration_ms``.

        A caller that knows the deadline better than the clock read of the
        add (asyncio's ``call_at(when)``) may set it, within that range; the
        task stays in its bucket.

        :raises ValueError: if set after ``expiration_ms`` or too far before
        """
        return self._expiration_ms * NS_PER_MS - self._early_ns

    @deadline_ns.setter
    def deadline_ns(self, value):
        cdef int64_t end = self._expiration_ms * NS_PER_MS
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise TypeError(f"deadline_ns must be an int, got {value!r}")
        v = _index(value)
        if not end - 0xFFFFFFFF <= v <= end:
            raise ValueError(
                f"deadline_ns must be in [{end - 0xFFFFFFFF}, {end}] "
                f"(expiration_ms {self._expiration_ms}), got {value!r}"
            )
        self._early_ns = <unsigned int>(end - <int64_t>v)

    @property
    def fn(self):
        """The callable run() calls, or None (subclass, or released after use)."""
        return self._fn

    @property
    def args(self):
        """Positional arguments for fn."""
        return self._args if self._args is not None else ()

    @property
    def cancelled(self):
        """True if cancel() stopped this task from running."""
        return _state_of(self) == CANCELLED

    @property
    def pending(self):
        """True while the task is added and has neither started nor been cancelled."""
        cdef unsigned char state = _state_of(self)
        return state == PENDING or state == EXPIRED

    @property
    def done(self):
        """True once run() has returned (or raised)."""
        return _state_of(self) == DONE

    @property
    def state(self):
        """One of idle, pending, expired, running, done, cancelled."""
        return _STATE_NAMES[_state_of(self)]

    def run(self):
        """Run the task: call ``fn(*args)``.  Subclasses override this."""
        fn = self._fn
        if fn is not None:
            fn(*self._args)

    # Replaced by a METH_NOARGS method descriptor at import (_cancel_noargs,
    # with this docstring): no CyFunction or argument-parsing adapter.
    @cython.binding(False)
    @cython.embedsignature(True)
    @cython.embedsignature.format("clinic")
    # Installed: runs _cancel_noargs (_wheel_fastcall.pxi),
    # put in the type's dict at import (the table at the end of
    # _wheel.pyx); this def carries the docstring and is never called.
    def cancel(self):
        """Stop the task from running.

        Runtime complexity: O(1) (unlinks the node from its bucket).

        >>> TimerTask(5, print).cancel()   # never added: nothing to cancel
        False

        :return: True iff the task was pending (or linked in a bucket by
            TimerTaskList.add) and now never runs
        """

    # METH_O, like cancel(): no CyFunction vectorcall adapter per call.
    @cython.binding(False)
    @cython.embedsignature(True)
    @cython.embedsignature.format("clinic")
    def postpone(self, delay_ms):
        """Move this pending task to run ``delay_ms`` from now (later or sooner).

        The same as ``task.delay_ms = delay_ms`` then ``timer.add(task)`` on
        the timer it is pending in, in one call: what a heartbeat or an idle
        timeout does on every message.  A task that was due but has not
        started yet is taken back.  If the timer refuses the new deadline,
        the task stays where it was.

        Runtime complexity: O(levels) (an O(1) unlink, then the add).

        >>> core = TimerCore(manual=True)
        >>> task = TimerTask(100, print, "late")
        >>> core.add(task)
        >>> task.postpone(250), task.expiration_ms, len(core)
        (True, 250, 1)
        >>> task.cancel(), task.postpone(10)
        (True, False)

        :param delay_ms: the new delay in milliseconds (int or float)
        :return: True if the task was pending and now runs ``delay_ms`` from
            now; False if it already started, ran or was cancelled (it is
            left alone: schedule a new task)
        :raises RuntimeError: if the task was never added to a timer, or its
            timer is gone or closed
        :raises TypeError: if ``delay_ms`` is not a number
        :raises ValueError: if ``delay_ms`` is NaN or infinite
        :raises OverflowError: if the deadline is out of the clock's range
        """
        cdef TimerTaskList bucket
        cdef TimerCore core
        cdef double old_delay
        cdef unsigned char old_is_int
        cdef int64_t delay_ns
        if TW_FT_LOCKS:
            return _postpone_locked(self, delay_ms)
        if self._state != PENDING and self._state != EXPIRED:
            if self._state == IDLE:
                raise RuntimeError(
                    f"{self!r} was never added to a timer; add it with timer.add(task)"
                )
            return False
        bucket = self._list
        cdef PyObject *owner = NULL
        if bucket is not None and bucket._counter._owner is not None:
            owner = tw_weakref_get(<PyObject *>bucket._counter._owner)
        if owner is NULL:
            raise RuntimeError(f"{self!r} is not pending in a live timer")
        core = <TimerCore>owner
        TW_DECREF(owner)  # `core` holds its own reference now
        old_delay = self._delay_ms
        old_is_int = self._delay_is_int
        delay_ns = _delay_to_ns(delay_ms, self)
        try:
            wake = _add(core, self, core._now_ns(), delay_ns, False)
        except BaseException:
            self._delay_ms = old_delay
            self._delay_is_int = old_is_int
            raise
        if wake:
            core._on_wake()
        return True

    def __repr__(self):
        return (
            f"<{type(self).__name__} delay_ms={self.delay_ms!r} "
            f"state={_STATE_NAMES[_state_of(self)]} expiration_ms={self._expiration_ms}>"
        )


cdef object _cancel_locked(TimerTask self):
    # TimerTask.cancel on free-threaded builds: the GIL build's logic under
    # the lock of the timer the task is in (none if it is in no bucket).
    # ``b`` is borrowed (_lock_list): still valid after the task lets go of
    # it, for the unlock.  The callable and arguments are read only once the
    # task is ours to cancel: before that, the runner may be releasing them.
    cdef PyObject *b = _lock_task(self)
    cdef PyObject *fn = NULL
    cdef object args = None
    cdef object keep = None
    if b is not NULL and (<TimerTaskList>b)._counter._owner is None:
        # A bucket linked by hand (no timer keeps it alive): the unlink may
        # drop its last reference, and the unlock below still needs it.
        keep = <object>b
    # One read: with no bucket (no lock held) the state may change meanwhile.
    cdef unsigned char state = _state_of(self)
    if state == PENDING:
        if b is not NULL and self._next is not NULL:
            (<TimerTaskList>b)._unlink(self)
    elif state == EXPIRED:
        if b is not NULL:
            tw_atomic_add_ssize(&(<TimerTaskList>b)._counter.value, -1)
        _set_list(self, None)
    elif state == IDLE and b is not NULL and self._next is not NULL:
        (<TimerTaskList>b)._unlink(self)
    else:
        if b is not NULL:
            tw_unlock(&(<TimerTaskList>b)._counter._mu)
        return False
    tw_store_u8(&self._state, CANCELLED)
    if self._fn is not None:
        # _release, with the callable moved out rather than copied: a
        # callable shared by many tasks (and threads) gets one atomic
        # reference count change per cancel, not three.
        self._spent = True
        args = self._args
        self._args = ()
        TW_TASK_TAKE_FN(self, &fn)
    if b is not NULL:
        tw_unlock(&(<TimerTaskList>b)._counter._mu)
    # ``fn`` and ``args`` (the last references, maybe) go after the unlock.
    if fn is not NULL:
        TW_DECREF(fn)
    return True


cdef object _postpone_locked(TimerTask self, object delay_ms):
    # TimerTask.postpone on free-threaded builds: checks and the move under
    # the lock of the timer the task is in; _on_wake after unlocking.
    cdef TimerTaskList bucket
    cdef TimerCore core
    cdef double old_delay
    cdef unsigned char old_is_int, state
    cdef int64_t delay_ns = _delay_to_ns(delay_ms)  # validate before locking
    cdef PyObject *owner = NULL
    cdef PyObject *b = _lock_task(self)
    bucket = <TimerTaskList>b if b is not NULL else None
    try:
        state = _state_of(self)
        if state != PENDING and state != EXPIRED:
            if state == IDLE:
                raise RuntimeError(
                    f"{self!r} was never added to a timer; add it with timer.add(task)"
                )
            return False
        if bucket is not None and bucket._counter._owner is not None:
            owner = tw_weakref_get(<PyObject *>bucket._counter._owner)
        if owner is NULL:
            raise RuntimeError(f"{self!r} is not pending in a live timer")
        core = <TimerCore>owner
        TW_DECREF(owner)
        old_delay = self._delay_ms
        old_is_int = self._delay_is_int
        _delay_to_ns(delay_ms, self)
        try:
            wake = _add(core, self, core._now_ns(), delay_ns, False)
        except BaseException:
            self._delay_ms = old_delay
            self._delay_is_int = old_is_int
            raise
    finally:
        if bucket is not None:
            tw_unlock(&bucket._counter._mu)
    if wake:
        core._on_wake()
    return True


cdef inline object _task_cancel(TimerTask self):
    # TimerTask.cancel's body.
    cdef PyObject *bucket
    if TW_FT_LOCKS:
        # Free-threaded: under the timer's lock (see _wheel.pxd); the
        # callable is released after unlocking (its __del__ may call us).
        return _cancel_locked(self)
    # Borrowed: the bucket is not touched after the task drops its
    # reference to it (_unlink; the counter is updated first below).
    bucket = <PyObject *>self._list
    if self._state == PENDING:
        if bucket != <PyObject *>None and self._next is not NULL:
            _unlink_entry(<TimerTaskList>bucket, self)
    elif self._state == EXPIRED:
        if bucket != <PyObject *>None:
            tw_atomic_add_ssize(&(<TimerTaskList>bucket)._counter.value, -1)
        _set_list(self, None)
    elif (self._state == IDLE and self._next is not NULL
          and bucket != <PyObject *>None):
        # Linked by hand with TimerTaskList.add (Kafka's TimerTaskListTest):
        # off the common path, which tests PENDING first.
        _unlink_entry(<TimerTaskList>bucket, self)
    else:
        return False
    tw_store_u8(&self._state, CANCELLED)
    _release(self)
    return True
