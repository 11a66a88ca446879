# _wheel_ring.pxi: included by _wheel.pyx (one extension module).
# A node in its bucket's ring: link, unlink, the list slot, and the
# per-task lock of free-threaded builds (_lock_list, _lock_task).
# Calls: _ftlock.h (through _wheel.pxd), _wheel_struct.h.

cdef extern from "_wheel_struct.h":
    void **TW_ENTRY_LIST_SLOT(TimerTaskEntry e) noexcept


cdef extern from "_wheel_struct.h":
    void TW_BUCKET_RING_CHECK() noexcept

TW_BUCKET_RING_CHECK()


cdef extern from "_wheel_struct.h":
    void TW_TASK_TAKE_FN(TimerTask t, PyObject **out) noexcept


cdef inline void _set_list(TimerTaskEntry entry, TimerTaskList bucket) noexcept:
    # ``entry._list = bucket`` as an atomic store: _lock_list reads the slot
    # without the lock (_ftlock.h; a plain store with a GIL).
    cdef PyObject *old = <PyObject *>entry._list
    TW_INCREF(<PyObject *>bucket)
    tw_store_ptr(TW_ENTRY_LIST_SLOT(entry), <void *>bucket)
    TW_DECREF(old)


cdef inline void _link_tail(TimerTaskList bucket, TimerTaskEntry entry) noexcept:
    # TimerTaskList._link: the bucket takes a reference to the entry (the
    # ring's); the links themselves are borrowed pointers.
    cdef PyObject *tail = bucket._tail
    entry._next = <PyObject *>bucket
    entry._prev = tail
    _set_list(entry, bucket)
    (<TimerTaskEntry>tail)._next = <PyObject *>entry
    bucket._tail = <PyObject *>entry
    TW_INCREF(<PyObject *>entry)
    bucket._size += 1
    tw_atomic_add_ssize(&bucket._counter.value, 1)


cdef inline void _unlink_entry(TimerTaskList bucket, TimerTaskEntry entry) noexcept:
    # TimerTaskList._unlink.  Drops the ring's reference last: the caller
    # holds its own (a Cython argument is a borrowed reference its caller
    # keeps alive), so the entry is never freed here.  The bucket is not
    # touched after the entry lets go of it: a bucket linked by hand
    # (TimerTaskList.add) may have had no other owner, and TimerTask.cancel
    # passes it borrowed.
    cdef PyObject *prev = entry._prev
    cdef PyObject *nxt = entry._next
    (<TimerTaskEntry>prev)._next = nxt
    (<TimerTaskEntry>nxt)._prev = prev
    entry._prev = NULL
    entry._next = NULL
    bucket._size -= 1
    tw_atomic_add_ssize(&bucket._counter.value, -1)
    _set_list(entry, None)
    TW_DECREF(<PyObject *>entry)


cdef inline PyObject *_list_of(TimerTaskEntry entry) noexcept:
    # ``entry._list`` read without its timer's lock (an atomic load), as a
    # borrowed pointer (Py_None for no bucket).
    return <PyObject *>tw_load_ptr(TW_ENTRY_LIST_SLOT(entry))


cdef inline unsigned char _state_of(TimerTask task) noexcept:
    # ``task._state`` read without its timer's lock (an atomic load).
    return tw_load_u8(&task._state)


cdef PyObject *_lock_list(TimerTaskEntry entry) noexcept:
    """Free-threaded builds: lock the timer ``entry`` is linked in or expired by.

    Returns its bucket (``entry._list``, borrowed) with ``_list._counter._mu``
    held, or NULL (no timer's lock held) if the entry is in no bucket.  The
    first read of ``_list`` is unlocked: the entry moves only under that
    lock, so it is read again under it and the loop retries if it changed.

    No reference is taken: a bucket lives as long as its timer (the wheel
    owns its buckets, the TimerCore its expired list), so the pointer stays
    valid whatever the entry does meanwhile.  Taking one would be an atomic
    add on the bucket's reference count, shared by every thread on that
    timer: with two threads on one timer, those adds (6 per cancel)
    bounced the bucket's cache line between the cores.
    """
    cdef PyObject *b = _list_of(entry)
    while b != <PyObject *>None:
        tw_lock(&(<TimerTaskList>b)._counter._mu)
        if <PyObject *>entry._list == b:
            return b
        tw_unlock(&(<TimerTaskList>b)._counter._mu)
        b = _list_of(entry)
    return NULL


cdef PyObject *_lock_task(TimerTask task) noexcept:
    """_lock_list for a task, waiting out a move by another thread.

    A pending or expired task whose ``_list`` reads None is between the
    unlink and the re-link of an add() running under its timer's lock in
    another thread: look again (bounded; that thread holds the lock for a
    few hundred instructions).
    """
    cdef PyObject *bucket
    cdef Py_ssize_t spins = 0
    cdef unsigned char state
    while True:
        bucket = _lock_list(task)
        if bucket is not NULL or spins >= 1_000_000:
            return bucket
        state = _state_of(task)
        if state != PENDING and state != EXPIRED:
            return bucket
        spins += 1
