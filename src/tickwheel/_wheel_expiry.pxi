# _wheel_expiry.pxi: included by _wheel.pyx (one extension module).
# Expiry: polling the due buckets (_poll, and across lanes
# _take_due_laned), taking the ready list, and running expired tasks
# (_run_tasks, one task at a time: _start_task, _end_task).
# Calls: bucket, queue, levels, ring, alloc (_release), place (_expire),
# lanes (_cores, _lock_task).


cdef list _poll(TimerCore core, int64_t limit, bint step):
    # TimerCore._take_due on one core (under its lock on free-threaded
    # builds): every bucket due at ``limit`` emptied, each task moved down
    # a level or expired; the ready tasks merged in, in expiration order.
    cdef list fresh = []
    cdef list expired = core._ready
    cdef list heap = core._queue._heap
    cdef TimingWheel wheel = core._wheel
    cdef TimerTaskList bucket
    cdef TimerTaskEntry node
    cdef int64_t head, last = 0
    cdef bint have_last = False
    cdef Py_ssize_t n, i
    cdef PyObject **nodes
    cdef Py_ssize_t n_ready = len(expired)
    core._ready = fresh
    while heap:
        head = (<TimerTaskList>heap[0])._expiration_ms
        if head > limit:
            break
        if step and have_last and head > last and len(expired):
            break
        bucket = core._queue._pop()
        last = head
        have_last = True
        wheel._advance(head)
        n = bucket._size
        if n < DETACH_MIN:
            while bucket._head != <PyObject *>bucket:
                node = <TimerTaskEntry>bucket._head
                bucket._unlink(node)  # `node` keeps it alive
                if not wheel._add(node):
                    _expire(core, <TimerTask>node)
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
                        _expire(core, <TimerTask>node)
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
                core._queue._offer(bucket)
                expired.extend(core._ready)
                core._ready = expired
                raise
            finally:
                free(nodes)
        bucket._has_expiration = False
    if n_ready and len(expired) > n_ready:
        return _in_expiration_order(expired, n_ready)
    return expired


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
                part = _poll(core, upto, step)
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


cdef list _take_ready_laned(TimerCore self):
    # TimerCore._take_ready on a laned timer: each lane's ready list, taken
    # under its lock, merged by expiration as _take_due_laned merges.
    cdef list ready = []
    cdef list keys = []  # expirations read under each lane's lock
    cdef TimerCore core
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


cdef Py_ssize_t _run_tasks(TimerCore self, object tasks, object on_error,
                           bint set_clock) except -1:
    # TimerCore._run: each task of ``tasks`` still expired, run unlocked;
    # ``Exception``s go to on_error(task, exc).
    cdef Py_ssize_t ran = 0
    cdef TimerTask task
    cdef Py_ssize_t i = 0
    cdef bint is_list = type(tasks) is list
    cdef PyObject *ahead
    cdef bint laned = self._lanes is not None
    # The lock of the lane the task expired in (this timer's unless laned).
    cdef tw_mutex *mu = &self._counter._mu
    cdef tw_mutex *held
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
        held = _start_task(self, task, mu, laned, set_clock)
        if held is NULL:
            continue  # cancelled, re-added, running or done
        mu = held
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
            _end_task(task, mu)
            if TW_FT_LOCKS:
                fn = None  # (free-threaded: not held into the next task)
    return ran


cdef inline tw_mutex *_start_task(TimerCore self, TimerTask task, tw_mutex *mu, bint laned,
                                  bint set_clock) noexcept:
    # EXPIRED -> RUNNING, uncounted and out of its bucket, under the lock of
    # the timer (or, laned, of the lane) it expired in, which is returned;
    # NULL if the task is no longer expired.  With ``set_clock`` the manual
    # clock reads the task's expiration while it runs.
    cdef PyObject *b
    cdef TimerTaskList bucket
    cdef int64_t at
    if laned:
        # A laned timer: the lock of the lane the task expired in.
        b = _lock_task(task)
        if b is NULL:
            return NULL  # in no bucket: cancelled, running or done
        mu = &(<TimerTaskList>b)._counter._mu
        if task._state != EXPIRED:
            tw_unlock(mu)
            return NULL
    elif TW_FT_LOCKS:
        # EXPIRED -> RUNNING under the timer's lock (a cancel() from
        # another thread takes it too); the task runs unlocked.
        tw_lock(mu)
        if task._state != EXPIRED:
            tw_unlock(mu)
            return NULL
    elif task._state != EXPIRED:
        return NULL
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
    return mu


cdef inline void _end_task(TimerTask task, tw_mutex *mu) noexcept:
    # RUNNING -> DONE, the callable released, unless the task was re-added
    # or cancelled while it ran.
    if TW_FT_LOCKS:
        # Under the lock; the callable goes after.  (Re-added by its
        # callable, a task may now be in another lane, under another lock:
        # its state is read atomically, and only this thread moves a task
        # out of RUNNING.)
        tw_lock(mu)
        if _state_of(task) == RUNNING:
            fn = task._fn
            held_args = task._args
            tw_store_u8(&task._state, DONE)
            _release(task)
        tw_unlock(mu)
    elif task._state == RUNNING:
        tw_store_u8(&task._state, DONE)
        _release(task)
