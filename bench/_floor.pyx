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
