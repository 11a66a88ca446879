# cython: language_level=3
"""The cheapest timer a Python loop can call, for W1/W2's floor rows.

``ClockOnly.schedule`` does what every relative-delay timer must do and
nothing else: read CLOCK_MONOTONIC (the clock ``time.monotonic_ns`` reads)
and add the delay.  Timing the benchmark loops with it (and ``id`` as
cancel) shows how much of a tickwheel iteration is the Python loop and the
clock, which no timer can avoid, and how much is left to the wheel.
``ClockHandle.schedule`` also returns what every timer's schedule must
return, a new handle that can be cancelled: an object with the deadline and
the callable, from a freelist (as tickwheel's nodes and CPython's lists
come), whose ``cancel`` drops the callable.  It is the floor for a call of
tickwheel's shape (schedule returns an object, cancel is a method of its
type), which is the wheel's cost with the wheel taken out.  ``ClockNode`` returns
the same handle padded to the size of a tickwheel node (``Node``): the
difference between the two floors is what the node's size alone costs in
the allocator and the caches, with no wheel work.  Every method
is a plain C method descriptor (``binding=False``), as tickwheel's
``schedule`` and ``cancel`` are: a Cython function object would add its
own call adapter (4-6 ns per iteration on 3.14) to the floor.
Compiled on first use by ``pyximport`` (bench/measure.py).
"""

cimport cython
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF

cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clk, timespec *tp)
    enum: CLOCK_MONOTONIC


cdef class ClockOnly:
    cdef public long long deadline_ns

    @cython.binding(False)
    def schedule(self, delay_ms, fn):
        """Compute the deadline as a timer would; the handle is ``fn``."""
        cdef timespec ts
        clock_gettime(CLOCK_MONOTONIC, &ts)
        self.deadline_ns = (
            ts.tv_sec * 1_000_000_000LL + ts.tv_nsec + <long long>delay_ms * 1_000_000
        )
        return fn


@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class Handle:
    """A cancellable handle: a deadline and the callable, nothing else.

    Untracked by the garbage collector, as tickwheel's nodes are (a handle
    refers to no container of its own).
    """
    cdef long long deadline_ns
    cdef object fn

    @cython.binding(False)
    def cancel(self):
        """Drop the callable; True iff it was still there."""
        if self.fn is None:
            return False
        self.fn = None
        return True


cdef class ClockHandle:
    @cython.binding(False)
    def schedule(self, delay_ms, fn):
        """Compute the deadline as a timer would; return a new Handle."""
        cdef timespec ts
        cdef Handle h = Handle.__new__(Handle)
        clock_gettime(CLOCK_MONOTONIC, &ts)
        h.deadline_ns = ts.tv_sec * 1_000_000_000LL + ts.tv_nsec + <long long>delay_ms * 1_000_000
        h.fn = fn
        return h


@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class Node:
    """A Handle the size of a tickwheel node (80 bytes on 64-bit builds).

    The six padding words stand for what a node of the wheel holds besides
    the deadline and the callable (its two links, its bucket, the
    arguments, the delay as given, the state bytes).  They are written on
    schedule, as the wheel writes them, and read by nothing.
    """
    cdef long long deadline_ns
    cdef object fn
    cdef long long pad[6]

    @cython.binding(False)
    def cancel(self):
        """Drop the callable; True iff it was still there."""
        if self.fn is None:
            return False
        self.fn = None
        return True


cdef class ClockNode:
    @cython.binding(False)
    def schedule(self, delay_ms, fn):
        """ClockHandle.schedule, returning a node-sized Node."""
        cdef timespec ts
        cdef Node h = Node.__new__(Node)
        clock_gettime(CLOCK_MONOTONIC, &ts)
        h.deadline_ns = ts.tv_sec * 1_000_000_000LL + ts.tv_nsec + <long long>delay_ms * 1_000_000
        h.fn = fn
        h.pad[0] = h.pad[1] = h.pad[2] = h.pad[3] = h.pad[4] = h.pad[5] = h.deadline_ns
        return h


@cython.final
@cython.no_gc
@cython.freelist(256)
cdef class RingNode:
    """A node of a ClockRing list: deadline, callable, two links (80 bytes)."""
    cdef long long deadline_ns
    cdef object fn
    cdef PyObject *prev
    cdef PyObject *next
    cdef long long pad[4]

    @cython.binding(False)
    def cancel(self):
        """Unlink the node and drop the callable; True iff it was linked."""
        cdef PyObject *p
        cdef PyObject *n
        if self.next is NULL:
            return False
        p = self.prev
        n = self.next
        (<RingNode>p).next = n
        (<RingNode>n).prev = p
        self.prev = NULL
        self.next = NULL
        self.fn = None
        Py_DECREF(self)  # the list's reference
        return True


cdef class ClockRing:
    """The least a timer with an O(1) unlink does: 20 circular lists.

    ``schedule`` reads the clock, makes a RingNode and links it at the tail
    of one list (the list holds a reference); its ``cancel`` unlinks it.
    No levels, no queue, no expiry.  The list is picked from the delay
    (``by_clock=False``, ``floor-ring``) or from the deadline's millisecond
    (``by_clock=True``, ``floor-ring-clock``), as a timer must: the
    difference is what waiting for the clock reading costs a link.
    """
    cdef list roots
    cdef bint by_clock

    def __init__(self, by_clock=False):
        cdef RingNode r
        self.by_clock = by_clock
        self.roots = []
        for _ in range(20):
            r = RingNode.__new__(RingNode)
            r.prev = <PyObject *>r
            r.next = <PyObject *>r
            self.roots.append(r)

    @cython.binding(False)
    @cython.cdivision(True)
    def schedule(self, delay_ms, fn):
        """A new RingNode, linked at the tail of its list."""
        cdef timespec ts
        cdef RingNode h = RingNode.__new__(RingNode)
        cdef long long d = delay_ms
        cdef PyObject *root
        cdef PyObject *tail
        clock_gettime(CLOCK_MONOTONIC, &ts)
        h.deadline_ns = ts.tv_sec * 1_000_000_000LL + ts.tv_nsec + d * 1_000_000
        h.fn = fn
        if self.by_clock:
            root = <PyObject *>self.roots[(h.deadline_ns // 1_000_000) % 20]
        else:
            root = <PyObject *>self.roots[d % 20]
        tail = (<RingNode>root).prev
        h.next = root
        h.prev = tail
        (<RingNode>tail).next = <PyObject *>h
        (<RingNode>root).prev = <PyObject *>h
        Py_INCREF(h)
        return h

    def close(self):
        """Unlink every node (the lists' references go)."""
        cdef RingNode r
        for r in self.roots:
            while r.next != <PyObject *>r:
                (<RingNode>r.next).cancel()
