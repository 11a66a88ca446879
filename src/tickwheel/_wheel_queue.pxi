# _wheel_queue.pxi: included by _wheel.pyx (one extension module).
# The delay queue: DelayQueue, a binary heap of buckets by expiration.
# Calls: bucket (_before, _set_expiration).

@cython.final
@cython.no_gc
cdef class DelayQueue:
    """DelayQueue()
--

    Buckets ordered by expiration: tells the driver when the next one is due.

    Runtime complexity: O(log b) offer and poll for b queued buckets (b is at
    most levels × wheel_size, about a hundred in practice).
    """

    def __cinit__(self):
        self._heap = []

    def __len__(self):
        return len(self._heap)

    def offer(self, TimerTaskList bucket):
        """Queue ``bucket`` at its expiration; return True iff it is the new head."""
        if not bucket._has_expiration:
            raise ValueError("bucket has no expiration_ms")
        return self._offer(bucket)

    cdef bint _offer(self, TimerTaskList bucket) except -1:
        cdef list heap = self._heap
        cdef Py_ssize_t pos = len(heap)
        cdef Py_ssize_t parent
        cdef TimerTaskList other
        self._seq += 1
        bucket._seq = self._seq
        heap.append(bucket)
        while pos > 0:
            parent = (pos - 1) >> 1
            other = <TimerTaskList>heap[parent]
            if not _before(bucket, other):
                break
            heap[pos] = other
            pos = parent
        heap[pos] = bucket
        return pos == 0

    cdef TimerTaskList _pop(self):
        cdef list heap = self._heap
        cdef TimerTaskList top = <TimerTaskList>heap[0]
        cdef TimerTaskList last = <TimerTaskList>heap.pop()
        cdef Py_ssize_t n = len(heap)
        cdef Py_ssize_t pos = 0
        cdef Py_ssize_t child
        if n == 0:
            return top
        while True:
            child = 2 * pos + 1
            if child >= n:
                break
            if child + 1 < n and _before(
                <TimerTaskList>heap[child + 1], <TimerTaskList>heap[child]
            ):
                child += 1
            if not _before(<TimerTaskList>heap[child], last):
                break
            heap[pos] = heap[child]
            pos = child
        heap[pos] = last
        return top

    def peek(self):
        """The bucket due first, or None."""
        return self._heap[0] if self._heap else None

    @property
    def next_expiration_ms(self):
        """Expiration of the bucket due first, or None when empty."""
        if self._heap:
            return (<TimerTaskList>self._heap[0])._expiration_ms
        return None

    def poll(self, now_ms):
        """Remove and return the head bucket if it is due at ``now_ms``, else None."""
        if self._heap and (<TimerTaskList>self._heap[0])._expiration_ms <= now_ms:
            return self._pop()
        return None

    def _check(self):
        """Raise AssertionError unless the heap is ordered and keys are current."""
        cdef list heap = self._heap
        cdef Py_ssize_t i, child
        for i in range(len(heap)):
            bucket = <TimerTaskList>heap[i]
            if not (<TimerTaskList>bucket)._has_expiration:
                raise AssertionError(f"{bucket!r} queued without an expiration")
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap) and _before(heap[child], bucket):
                    raise AssertionError("heap order violated")
