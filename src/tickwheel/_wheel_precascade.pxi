# _wheel_precascade.pxi: included by _wheel.pyx (one extension module).
# Precascade: moving the tasks of the next overflow bucket down a level
# before its slot starts (TimerCore.precascade, next_precascade_ms), a
# bounded chunk per call, on every lane.
# Calls: levels, bucket, queue, place (_expire), lanes (_cores).


cdef Py_ssize_t _precascade_all(TimerCore self, Py_ssize_t budget) except -1:
    # TimerCore.precascade: each lane in turn, within the one budget, under
    # its lock (free-threaded builds, or laned).
    cdef Py_ssize_t looked = 0
    cdef TimerCore core
    if self._lanes is not None or TW_FT_LOCKS:
        for obj in _cores(self):
            core = <TimerCore>obj
            tw_lock(&core._counter._mu)
            try:
                looked += _precascade(core, budget - looked)
            finally:
                tw_unlock(&core._counter._mu)
            if looked >= budget:
                break
        return looked
    return _precascade(self, budget)


cdef Py_ssize_t _precascade(TimerCore core, Py_ssize_t budget) except -1:
    # One core: up to ``budget`` tasks of its chosen overflow bucket looked at.
    cdef TimingWheel lower = core._wheel
    cdef TimingWheel wheel = lower._overflow
    cdef TimerTaskList bucket, best = None
    cdef int64_t horizon, best_horizon = 0, best_span = 0, step
    cdef TimerTaskEntry node
    cdef Py_ssize_t looked = 0, n
    cdef int64_t now_ms = _floordiv(core._now_ns(), NS_PER_MS)
    cdef list heap = core._queue._heap
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
    if best is not core._pc_bucket or best._expiration_ms != core._pc_expiration:
        core._pc_bucket = best
        core._pc_expiration = best._expiration_ms
        core._pc_left = 0
        core._pc_horizon = -1
    if core._pc_left <= 0:
        step = best_span // 8 if best_span >= 8 else 1
        if core._pc_horizon >= 0 and best_horizon - core._pc_horizon < step:
            return 0
        core._pc_left = best._size
        core._pc_horizon = best_horizon
    n = budget if budget < core._pc_left else core._pc_left
    while looked < n:
        if best._head == <PyObject *>best:
            core._pc_left = 0
            break
        node = <TimerTaskEntry>best._head
        best._unlink(node)
        # Lands lower if it fits, else back at this bucket's tail (the
        # level's clock has not moved, so its slot is the same one).
        if not core._wheel._add(node):
            _expire(core, <TimerTask>node)
            core._ready.append(node)
        looked += 1
    core._pc_left -= looked
    return looked


cdef object _next_precascade_all(TimerCore self):
    # TimerCore.next_precascade_ms: the earliest over the lanes, each read
    # under its lock (free-threaded builds, or laned).
    cdef TimerCore core
    if self._lanes is None and not TW_FT_LOCKS:
        return _next_precascade(self)
    best = None
    for obj in _cores(self):
        core = <TimerCore>obj
        tw_lock(&core._counter._mu)
        try:
            at = _next_precascade(core)
        finally:
            tw_unlock(&core._counter._mu)
        if at is not None and (best is None or at < best):
            best = at
    return best


cdef object _next_precascade(TimerCore core):
    # One core: when its precascade may next find work, or None.
    cdef int64_t now_ms = _floordiv(core._now_ns(), NS_PER_MS)
    cdef TimingWheel lower = core._wheel
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
            if (bucket is core._pc_bucket
                    and bucket._expiration_ms == core._pc_expiration
                    and core._pc_left <= 0 and core._pc_horizon >= 0):
                need = max(need, core._pc_horizon + (span // 8 if span >= 8 else 1))
            # The lower level's horizon at t: t to its tick, plus its reach.
            at = _ceil_to(need - lower._interval_ms, lower._tick_ms)
            if at > now_ms and (not found or at < best):
                best = at
                found = True
        lower = wheel
        wheel = wheel._overflow
    return best if found else None
