# _wheel_bucket.pxi: included by _wheel.pyx (one extension module).
# The bucket ring: TimerTaskList (a bucket is its ring's sentinel), and
# _before, the delay queue's order.
# Calls: ring.

@cython.final
@cython.no_gc
cdef class TimerTaskList:
    """TimerTaskList(counter=None)
--

    A bucket: a circular doubly-linked list of entries.

    Runtime complexity: O(1) add and remove; flush is O(n).

    :param counter: the TaskCounter shared by every bucket of one timer
    """

    def __cinit__(self, TaskCounter counter=None):
        self._tail = <PyObject *>self
        self._head = <PyObject *>self
        self._counter = counter if counter is not None else TaskCounter()

    # No __dealloc__: entries keep their bucket alive, so a bucket is freed
    # empty (or after its wheel cleared it), and the self-loop of an empty
    # ring is made of borrowed pointers, which keep nothing alive.

    @property
    def counter(self):
        """The TaskCounter this bucket adds to and subtracts from."""
        return self._counter

    @property
    def expiration_ms(self):
        """Start of the time slot this bucket holds, or None when not queued."""
        return self._expiration_ms if self._has_expiration else None

    def set_expiration(self, expiration_ms):
        """Set the slot time; return True iff it changed (queue the bucket then)."""
        cdef bint changed
        if expiration_ms is None:
            changed = self._has_expiration
            self._has_expiration = False
            return changed
        return self._set_expiration(_check_time(expiration_ms, "expiration_ms"))

    cdef bint _set_expiration(self, int64_t expiration_ms) noexcept:
        cdef bint changed = not self._has_expiration or self._expiration_ms != expiration_ms
        self._expiration_ms = expiration_ms
        self._has_expiration = True
        return changed

    def __len__(self):
        return self._size

    def add(self, entry):
        """Link ``entry`` at the tail, first unlinking it from any bucket it is in."""
        if not isinstance(entry, TimerTaskEntry):
            raise TypeError(f"entry must be a TimerTaskEntry, got {entry!r}")
        cdef TimerTaskEntry e = entry
        if e._next is not NULL and e._list is not None:
            e._list._unlink(e)
        self._link(e)

    def remove(self, TimerTaskEntry entry):
        """Unlink ``entry`` if it is in this bucket; return True iff it was."""
        if entry._list is self and entry._next is not NULL:
            self._unlink(entry)
            return True
        return False

    def flush(self, fn):
        """Unlink every entry, reset the expiration, then call ``fn(entry)`` on each.

        The entries are detached before the first call, so ``fn`` may add them
        back to this very bucket.

        :return: how many entries were flushed
        """
        cdef list entries = self.entries()
        for node in entries:
            self._unlink(<TimerTaskEntry>node)
        self._has_expiration = False
        for entry in entries:
            fn(entry)
        return len(entries)

    def entries(self):
        """The linked entries, head to tail."""
        cdef list out = []
        cdef PyObject *root = <PyObject *>self
        cdef PyObject *node = self._head
        while node != root:
            out.append(<object>node)
            node = (<TimerTaskEntry>node)._next
        return out

    cdef void _link(self, TimerTaskEntry entry) noexcept:
        _link_tail(self, entry)

    cdef void _unlink(self, TimerTaskEntry entry) noexcept:
        _unlink_entry(self, entry)

    cdef PyObject **_detach(self) except NULL:
        # Empty a bucket of DETACH_MIN or more entries in one go: return them
        # in list order, each with the ring's reference handed over (a
        # malloc'd array; the caller clears each entry's links, drops the
        # reference and frees the array).
        # The walk goes from both ends at once: two independent pointer
        # chases, so a bucket that is not in the cache waits for two memory
        # loads at a time instead of one (the 10^7-timer drains).
        cdef Py_ssize_t n = self._size
        cdef Py_ssize_t lo = 0, hi = n - 1
        cdef PyObject *h = self._head
        cdef PyObject *t = self._tail
        cdef PyObject **out = <PyObject **>malloc(n * sizeof(PyObject *))
        if out is NULL:
            raise MemoryError()
        while lo < hi:
            out[lo] = h
            out[hi] = t
            h = (<TimerTaskEntry>h)._next
            t = (<TimerTaskEntry>t)._prev
            lo += 1
            hi -= 1
        if lo == hi:
            out[lo] = h
        self._head = <PyObject *>self
        self._tail = <PyObject *>self
        self._size = 0
        tw_atomic_add_ssize(&self._counter.value, -n)
        return out

    cdef void _clear(self) noexcept:
        # Unlink every entry, dropping the ring's references.  One at a time,
        # so the ring is consistent whenever a freed task's finalizer runs
        # (and whatever it adds is cleared too).  The caller keeps the bucket
        # alive (its wheel's list of buckets).
        while self._head != <PyObject *>self:
            self._unlink(<TimerTaskEntry>self._head)
        self._has_expiration = False

    def _check(self):
        """Raise AssertionError unless the ring is consistent."""
        cdef PyObject *root = <PyObject *>self
        cdef PyObject *node = root
        cdef PyObject *nxt
        cdef Py_ssize_t count = 0
        while True:
            nxt = (<TimerTaskEntry>node)._next
            if nxt is NULL or (<TimerTaskEntry>nxt)._prev != node:
                raise AssertionError("broken prev/next links")
            if nxt == root:
                break
            if (<TimerTaskEntry>nxt)._list is not self:
                raise AssertionError(
                    f"{<object>nxt!r} is linked here but points elsewhere"
                )
            count += 1
            if count > self._size:
                raise AssertionError("more nodes than the recorded size")
            node = nxt
        if count != self._size:
            raise AssertionError(f"size {self._size} but {count} nodes")

    def __repr__(self):
        return f"<TimerTaskList size={self._size} expiration_ms={self.expiration_ms}>"


cdef inline bint _before(TimerTaskList a, TimerTaskList b) noexcept:
    return a._expiration_ms < b._expiration_ms or (
        a._expiration_ms == b._expiration_ms and a._seq < b._seq
    )
