# cython: language_level=3
"""The cheapest timer a Python loop can call, for W1/W2's floor rows.

``ClockOnly.schedule`` does what every relative-delay timer must do and
nothing else: read CLOCK_MONOTONIC (the clock ``time.monotonic_ns`` reads)
and add the delay.  Timing the benchmark loops with it (and ``id`` as
cancel) shows how much of a tickwheel iteration is the Python loop and the
clock, which no timer can avoid, and how much is left to the wheel.
Compiled on first use by ``pyximport`` (bench/measure.py).
"""

cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clk, timespec *tp)
    enum: CLOCK_MONOTONIC


cdef class ClockOnly:
    cdef public long long deadline_ns

    def schedule(self, delay_ms, fn):
        """Compute the deadline as a timer would; the handle is ``fn``."""
        cdef timespec ts
        clock_gettime(CLOCK_MONOTONIC, &ts)
        self.deadline_ns = (
            ts.tv_sec * 1_000_000_000LL + ts.tv_nsec + <long long>delay_ms * 1_000_000
        )
        return fn
