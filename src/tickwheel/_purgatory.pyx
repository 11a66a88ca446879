# cython: freethreading_compatible=True
"""Compiled hot paths of Kafka's request purgatory.

See ``_purgatory.pxd`` for what is compiled and why, ``purgatory.py`` for
the design and the thread-safety protocol, and ``_purgatory_py.py`` for the
pure-Python twin of every name here; the docstrings below match it, line for
line the logic does too.

The source is split by concern into the ``_purgatory_*.pxi`` units included
at the end (hooks, lock, operations, the hot paths), built as one extension
module so their inline functions and direct calls stay.
"""

cimport cython
from cpython.exc cimport PyErr_CheckSignals
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.object cimport (
    Py_EQ,
    Py_TPFLAGS_HEAPTYPE,
    PyObject,
    PyObject_RichCompareBool,
    PyTypeObject,
)
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.ref cimport Py_INCREF
from cpython.pythread cimport (
    WAIT_LOCK,
    PY_LOCK_ACQUIRED,
    PY_LOCK_INTR,
    PyLockStatus,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_get_thread_ident,
    PyThread_release_lock,
    PyThread_type_lock,
)


cdef extern from "pythread.h":
    # Public C API since 3.2 (Cython's pythread.pxd does not declare it).
    PyLockStatus PyThread_acquire_lock_timed(
        PyThread_type_lock lock, long long microseconds, int intr_flag
    ) nogil

import logging
import sys
import time

from tickwheel._wheel import TimerTask as _TimerTask
from tickwheel._wheel cimport (
    TimerCore,
    _cancel_task,
    _timer_add,
    _timer_len,
    TW_FT_LOCKS,
    tw_atomic_add_ssize,
    tw_atomic_load_ssize,
    tw_atomic_store_ssize,
    tw_load_u8,
    tw_load_ul,
    tw_lock,
    tw_mutex,
    tw_store_u8,
    tw_store_ul,
    tw_unlock,
)

__all__ = ["CountdownOperation", "DelayedOperation"]

logger = logging.getLogger("tickwheel")

# Cached module-level callables (uvloop's "cdef object" aliases).
cdef object _monotonic = time.monotonic


include "_purgatory_hooks.pxi"
include "_purgatory_lock.pxi"
include "_purgatory_ops.pxi"
include "_purgatory_core.pxi"
