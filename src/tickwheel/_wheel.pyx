# cython: freethreading_compatible=True
"""Compiled core of tickwheel: buckets, timing wheels, bucket queue, timer core.

See ``_wheel.pxd`` for the design picture and the thread-safety contract, and
``_wheel_py.py`` for the pure-Python twin that mirrors every name here.

The source is split by concern into the ``_wheel_*.pxi`` units included
below, in this order; they build as one extension module (one C file), so
every ``cdef inline`` function and direct C call between them stays one
(docs/design.md, "Source layout", has the table of units and their calls).
The C that Cython cannot spell lives in ``_compat.h`` (CPython details),
``_ftlock.h`` (free-threaded locks), ``_wheel_struct.h`` (macros on
Cython's structs) and ``_wheel_inline.h`` (small helpers).
"""

cimport cython
from libc.math cimport NAN, ceil, fma, isinf, isnan
from libc.stdint cimport INT64_MIN, UINT32_MAX, int64_t, uint32_t, uint64_t
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject, PyTypeObject
from cpython.type cimport PyType_Check, PyType_IsSubtype
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport Py_DECREF
from libc.stdlib cimport free, malloc

import numbers
import operator
import time
import weakref
from functools import partial

__all__ = [
    "DEFAULT_TICK_MS",
    "DEFAULT_WHEEL_SIZE",
    "MAX_DELAY_MS",
    "DelayQueue",
    "TaskCounter",
    "TimerCore",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
]

DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20
PRECASCADE_CHUNK = 256
MAX_DELAY_MS = 2**62 // 1_000_000

# Compile-time constants: dividing by NS_PER_MS becomes a multiply-shift.
cdef enum:
    NS_PER_MS = 1_000_000
cdef int64_t C_MAX_DELAY_MS = 2**62 // 1_000_000
cdef int64_t C_MAX_TIME_MS = 2**62 // 1_000_000
# Latest deadline: its nanoseconds must fit an int64 (clock + MAX_DELAY_MS does).
cdef int64_t C_MAX_EXPIRATION_MS = (2**63 - 1) // 1_000_000

# Task states; a task is counted by len(timer) while PENDING or EXPIRED.
cdef enum:
    IDLE = 0
    PENDING = 1
    EXPIRED = 2
    RUNNING = 3
    DONE = 4
    CANCELLED = 5

_STATE_NAMES = ("idle", "pending", "expired", "running", "done", "cancelled")

# Cached module-level callables (uvloop's "cdef object" aliases).
cdef object _monotonic_ns = time.monotonic_ns
cdef object _index = operator.index
cdef object _partial = partial
cdef object _Real = numbers.Real
cdef object _weakref = weakref.ref



# CPython details behind one shim (src/tickwheel/_compat.h, version-guarded;
# docs/design.md "CPython internals" has the measurements that keep them).
cdef extern from "_compat.h":
    # The referent of a weakref.ref (a new reference), or NULL if dead.
    PyObject *tw_weakref_get(PyObject *ref) noexcept
    # The clock time.monotonic_ns() reads, in C (TW_HAVE_C_CLOCK: 0 where
    # no public C call reads it; then the core calls time.monotonic_ns()).
    bint TW_HAVE_C_CLOCK
    int64_t tw_monotonic_ns() nogil
    # For the METH_FASTCALL schedule() below: a new reference to a type's dict.
    object tw_type_dict(PyTypeObject *t)
    const char *TW_COMPAT_CLOCK
    const char *TW_COMPAT_TYPE_DICT
    bint TW_COMPAT_FREE_THREADED
    # The TimerTask freelist in tp_alloc/tp_free (none on free-threaded builds).
    ctypedef PyObject *(*allocfunc)(PyTypeObject *t, Py_ssize_t n) noexcept
    PyObject *tw_freelist_alloc(PyTypeObject *t, Py_ssize_t n, size_t size) noexcept
    int tw_install_freelist(PyTypeObject *t, allocfunc alloc, size_t size)
    Py_ssize_t tw_freelist_size()
    PyObject *tw_freelist_pop() noexcept
    ctypedef void (*destructor)(PyObject *o) noexcept
    int tw_install_dealloc(PyTypeObject *t, destructor d)
    const char *TW_COMPAT_FREELIST
    const char *TW_COMPAT_TYPE_VERSION
    const char *TW_COMPAT_DIVISION
    # n // d for n < 2**32 and 2 <= d <= 2**32 by a multiply-high with
    # r = tw_recip(d) where the compiler has 128-bit integers, else n // d.
    uint64_t tw_recip(uint64_t d) noexcept nogil
    uint64_t tw_div_by_recip(uint64_t n, uint64_t d, uint64_t r) noexcept nogil


include "_wheel_checks.pxi"
include "_wheel_alloc.pxi"
include "_wheel_ring.pxi"
include "_wheel_task.pxi"
include "_wheel_bucket.pxi"
include "_wheel_queue.pxi"
include "_wheel_levels.pxi"
include "_wheel_lanes.pxi"
include "_wheel_place.pxi"
include "_wheel_core.pxi"
include "_wheel_expiry.pxi"
include "_wheel_precascade.pxi"
include "_wheel_fastcall.pxi"
include "_wheel_loop.pxi"
include "_wheel_keeper.pxi"


# -- installed methods ----------------------------------------------------------
# What runs for these five methods is the C function named here, not the
# class body's def of the same name: each is written into its type's dict
# as a METH_FASTCALL (or METH_NOARGS) method descriptor, which skips the
# **kwargs dict and the CyFunction call adapter Cython gives a def
# (docs/design.md, "CPython internals", has the measurements).  The class
# body's def carries the docstring and signature only, and says so.
# _installed_methods() returns this table; tests/test_installed_methods.py
# checks each entry against the types and the class bodies.
_install_fastcall(&_schedule_def, "schedule", <void *>_schedule_fastcall,
                  "$self, delay_ms, fn, /, *args, **kwargs")
_install_fastcall(&_schedule_as_def, "schedule_as", <void *>_schedule_as_fastcall,
                  "$self, task_type, delay_ms, fn, /, *args")
_install_fastcall(&_loop_call_later_def, "_loop_call_later",
                  <void *>_loop_call_later_fastcall,
                  "$self, delay, callback, *args, context=None")
_install_fastcall(&_loop_call_at_def, "_loop_call_at", <void *>_loop_call_at_fastcall,
                  "$self, when, callback, *args, context=None")
_install_method(<PyTypeObject *>TimerTask, &_cancel_def, "cancel", <void *>_cancel_noargs,
                METH_NOARGS, "$self, /")


def _installed_methods():
    """(type name, method name, signature) of each method installed above."""
    return tuple(_INSTALLED)


cdef PyObject *_task_alloc(PyTypeObject *t, Py_ssize_t n) noexcept:
    # TimerTask's tp_alloc: sizeof(TimerTask) is a constant here.
    return tw_freelist_alloc(t, n, sizeof(TimerTask))


# Before any TimerTask exists (and before _purgatory's subtype is readied).
tw_install_freelist(<PyTypeObject *>TimerTask, _task_alloc, sizeof(TimerTask))
cdef bint _own_dealloc = tw_install_dealloc(<PyTypeObject *>TimerTask, _task_dealloc)


def _div_by_recip(uint64_t n, uint64_t d):
    """n // d as _wheel_link computes it for n < 2**32 (for tests)."""
    return tw_div_by_recip(n, d, tw_recip(d))


def _freelist_size():
    """How many freed TimerTask nodes the freelist holds (for tests)."""
    return tw_freelist_size()


def _compat():
    """The decisions of _compat.h this build took (tests/test_compat_shim.py)."""
    return {
        "clock": TW_COMPAT_CLOCK.decode(),
        "c_clock": TW_HAVE_C_CLOCK,
        "type_dict": TW_COMPAT_TYPE_DICT.decode(),
        "free_threaded": TW_COMPAT_FREE_THREADED,
        "freelist": TW_COMPAT_FREELIST.decode(),
        "type_version": TW_COMPAT_TYPE_VERSION.decode(),
        "task_dealloc": "tickwheel" if _own_dealloc else "cython",
        "division": TW_COMPAT_DIVISION.decode(),
    }
