# _wheel_place.pxi: included by _wheel.pyx (one extension module).
# Placement: where every new or re-added task gets its expiration and
# deadline (_expiration_of, the one place that computes them) and is linked
# into the wheel or made ready (_place).  Two routes lead here: _add (every
# add, postpone, schedule_as and asyncio call, under the timer's lock) and
# _schedule_small (schedule(delay_ms, fn) with an int delay on GIL builds).
# Calls: checks, alloc, ring, levels (_level_link, _wheel_link).


@cython.cdivision(True)
cdef inline int64_t _ceil_now_ms(TimerCore core, int64_t now_ns) noexcept:
    # _ceil_ms(now_ns) for a reading of the C clock, which never goes back:
    # the cached millisecond while the clock is still in it, so that what
    # is computed from it does not wait for the reading (the level and
    # bucket of schedule()'s task; the reading only decides a well-predicted
    # branch).  Taking the bucket from the reading itself cost ~15 ns a
    # schedule on 3.14 (bench/README.md).  GIL builds only (two fields, no
    # lock: TimerCore._ms_clock).
    if now_ns > core._ms_ceil_ns:
        core._ms_ceil = _ceil_ms(now_ns)
        core._ms_ceil_ns = core._ms_ceil * NS_PER_MS
    return core._ms_ceil


@cython.cdivision(True)
cdef inline int64_t _expiration_of(TimerCore core, int64_t now_ns, int64_t delay_ns,
                                   int64_t whole_ms, unsigned int *early) noexcept:
    """A task's expiration (ms) for a delay of ``delay_ns`` after the clock
    reading ``now_ns``, and in ``early`` how far its exact deadline
    (now_ns + delay_ns) lies before it (TimerTask._early_ns).

    The deadline rounded up to the millisecond, then up to the tick: never
    early.  For a whole number of ms on the C clock that is the clock's
    millisecond (rounded up) plus the delay: ``whole_ms`` is the delay in
    ms when the caller knows it is a whole number (schedule()'s int delay,
    _whole_ms), else 0, so that no division waits here.  Over
    C_MAX_EXPIRATION_MS the deadline is past the end of the clock's range:
    the caller refuses it (_past_clock_end, naming its argument) before
    anything moves.  No Python error can come from here, so the C compiler
    inlines it into schedule()'s frame.
    """
    cdef int64_t expiration, ms
    if core._ms_clock and whole_ms > 0:
        ms = _ceil_now_ms(core, now_ns)
        expiration = ms + whole_ms
        early[0] = <unsigned int>(ms * NS_PER_MS - now_ns)  # < 1 ms
    else:
        expiration = _ceil_ms(now_ns + delay_ns)
        if core._tick_ms != 1:
            expiration = _ceil_to(expiration, core._tick_ms)
        early[0] = _early_of(expiration, now_ns + delay_ns)
    return expiration


@cython.cdivision(True)
cdef inline int64_t _whole_ms(int64_t delay_ns) noexcept:
    # _expiration_of's ``whole_ms``: the delay in ms if it is a whole number.
    cdef int64_t q = delay_ns / NS_PER_MS
    return q if q * NS_PER_MS == delay_ns else 0


cdef inline int _place(TimerCore core, TimerTask task, int64_t now_ns, int64_t expiration,
                       bint by_table) except -1:
    # Link ``task`` (pending, its expiration set) into the wheel, or make it
    # ready if due.  1: the driver must wake (the task is ready, or its
    # bucket became the queue's head).  ``by_table``: schedule()'s walk,
    # through the timer's table of levels (_level_link), else up the chain
    # (_wheel_link), which leaves the table alone.
    cdef int placed = 0
    # "Due" is judged on the timer's clock: the wheel's own clock only
    # moves when a bucket is polled and may lag behind it.
    if expiration * NS_PER_MS > now_ns:
        if by_table:
            placed = _level_link(core, task, expiration)
            if placed == 3:  # due at the lowest level, or beyond the table
                placed = _wheel_link(core._wheel, task, expiration)
                _levels_refresh(core)
        else:
            placed = _wheel_link(core._wheel, task, expiration)
    if placed == 0:
        _expire(core, task)
        core._ready.append(task)
        return 1
    return placed == 2


cdef inline void _expire(TimerCore core, TimerTask task) noexcept:
    # Due: counted, off the wheel, pointing at the timer's (never linked)
    # expired bucket, so that running or cancelling it still finds the count.
    tw_store_u8(&task._state, EXPIRED)
    _set_list(task, core._expired)
    tw_atomic_add_ssize(&core._counter.value, 1)


cdef int _add(TimerCore core, TimerTask task, int64_t now_ns, int64_t delay_ns,
              bint fresh) except -1:
    # Place ``task`` ``delay_ns`` after ``now_ns``, a reading of the timer's
    # clock (under its lock on free-threaded builds); 1: the driver must
    # wake.  A pending or expired task is moved (the count is unchanged).
    # ``fresh``: the caller just made the task (idle, holding its
    # callable), so the checks of a re-add are skipped.
    cdef TimerTaskList owner
    cdef unsigned int early
    if core._closed:
        raise RuntimeError("timer is closed")
    if not fresh and task._spent:
        raise RuntimeError(
            f"{task!r} has run or been cancelled and released its callable; "
            "schedule a new task"
        )
    # Refused before anything moves (a re-added task stays put).
    cdef int64_t expiration = _expiration_of(core, now_ns, delay_ns, _whole_ms(delay_ns),
                                              &early)
    if expiration > C_MAX_EXPIRATION_MS:
        _past_clock_end(task.delay_ms, _floordiv(now_ns, NS_PER_MS))
    if not fresh and (task._state == PENDING or task._state == EXPIRED):
        owner = task._list
        if owner is not None and owner._counter is not core._counter:
            raise ValueError(f"{task!r} is pending in another timer")
        if task._state == PENDING:
            if owner is not None and task._next is not NULL:
                owner._unlink(task)
        else:
            tw_atomic_add_ssize(&core._counter.value, -1)
            _set_list(task, None)
            _drop_ready(core._ready, task)
    task._expiration_ms = expiration
    task._early_ns = early
    tw_store_u8(&task._state, PENDING)
    return _place(core, task, now_ns, expiration, False)


cdef TimerTask _schedule_as(TimerCore core, object task_type, object delay_ms, object fn,
                            tuple args):
    # schedule_as(task_type, delay_ms, fn, *args), and schedule() but for its
    # short path: a new task of ``task_type``, added.
    cdef TimerTask task
    cdef bint fresh = True
    cdef bint wake
    if task_type is TimerTask:
        task = _new_task(fn, args)
    else:
        # No __init__, no **kwargs dict, no Python frame, no tp_new adapter.
        task = <TimerTask>tw_new_instance(task_type)
        task._fn = fn
        task._args = args
        # A subtype with its own __new__ may have done anything: the full
        # checks of a re-add.
        fresh = tw_keeps_task_new(task_type, TimerTask)
    cdef int64_t delay_ns = _delay_to_ns(delay_ms, task)
    if TW_FT_LOCKS:
        tw_lock(&core._counter._mu)
        try:
            wake = _add(core, task, core._now_ns(), delay_ns, fresh)
        finally:
            tw_unlock(&core._counter._mu)
    else:
        wake = _add(core, task, core._now_ns(), delay_ns, fresh)
    if wake:
        core._on_wake()
    return task


cdef inline object _schedule_small(TimerCore core, long long delay_ms, PyObject *fn):
    # schedule(delay_ms, fn) on a GIL build, one lane, with a valid int
    # delay (_schedule_fastcall checks it with _int_ms) and a callable fn:
    # _schedule_as, _add and _place in one frame of _schedule_fastcall,
    # the task made in place (_made_task) and linked through the table of
    # levels (_level_link).  With the inline unlink and the METH_NOARGS
    # cancel, a W2-sliding schedule + cancel costs about a fifth fewer
    # instructions of tickwheel's own code (bench/README.md, "W1 and W2 per
    # Python version").
    cdef int64_t now_ns
    cdef unsigned int early
    if core._closed:
        raise RuntimeError("timer is closed")
    if core._ms_clock:
        now_ns = tw_monotonic_ns()
    else:
        now_ns = core._now_ns()
    # Everything that can refuse the task runs before it exists.
    cdef int64_t expiration = _expiration_of(core, now_ns, delay_ms * NS_PER_MS, delay_ms,
                                              &early)
    if expiration > C_MAX_EXPIRATION_MS:
        _past_clock_end(delay_ms, _floordiv(now_ns, NS_PER_MS))
    cdef TimerTask task = _made_task(fn, expiration, delay_ms, early)
    if _place(core, task, now_ns, expiration, True):
        core._on_wake()
    return task
