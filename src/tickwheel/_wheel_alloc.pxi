# _wheel_alloc.pxi: included by _wheel.pyx (one extension module).
# The task node's allocator: _made_task (schedule()'s exact TimerTask
# filled in place, TW_TASK_FILL), _task_dealloc, _new_task, _release.
# Calls: _compat.h's freelist, _wheel_struct.h's field macros.

# A new TimerTask comes from its type's own tp_new (Cython's, called in C by
# TimerTask.__new__), except schedule()'s on GIL builds (_made_task, below);
# its memory comes from _compat.h's freelist (tp_alloc/tp_free, installed at
# the end of this module; docs/design.md "CPython internals").
cdef extern from "Python.h":
    # On borrowed pointers (Cython's Py_INCREF/Py_DECREF take objects).
    void TW_INCREF "Py_INCREF"(PyObject *o) noexcept
    void TW_DECREF "Py_DECREF"(PyObject *o) noexcept


cdef extern from "_wheel_inline.h":
    bint TW_CALLABLE(PyObject *o) noexcept


cdef extern from "_wheel_inline.h":
    PyObject *TW_LIST_ITEM(PyObject *l, Py_ssize_t i)
    PyObject **TW_LIST_ITEMS(PyObject *l)
    object tw_new_instance(object t)
    int tw_keeps_task_new(object t, object base)


cdef extern from "_wheel_struct.h":
    void TW_TASK_FILL(PyObject *o, PyObject *fn, PyObject *args, int64_t expiration,
                      long long delay_ms, unsigned int early, unsigned char state) noexcept
    void TW_TASK_CLEAR(PyObject *o) noexcept
    # A new reference handed over as it is (no reference count change).
    TimerTask TW_STEAL_TASK "(PyObject *)"(PyObject *o)
    PyObject *PyObject_Init(PyObject *o, PyTypeObject *t) noexcept
    void *PyObject_Malloc(size_t n) noexcept
    PyTypeObject *TW_TYPE "Py_TYPE"(PyObject *o) noexcept
    void TW_TASK_FILL_CHECK() noexcept

TW_TASK_FILL_CHECK()


cdef inline TimerTask _made_task(PyObject *fn, int64_t expiration, long long delay_ms,
                                 unsigned int early):
    # schedule()'s new exact TimerTask on a GIL build (no free-threaded
    # caller: the freelist is compiled out there): what TimerTask.__new__
    # and the field assignments of _schedule_as give, from the freelist
    # or fresh memory, without Cython's tp_new chain (~80 instructions on
    # 3.14) or any field written twice.
    cdef PyObject *o = tw_freelist_pop()
    if o is NULL:
        o = <PyObject *>PyObject_Malloc(sizeof(TimerTask))
        if o is NULL:
            raise MemoryError()
    PyObject_Init(o, <PyTypeObject *>TimerTask)
    TW_TASK_FILL(o, fn, <PyObject *>_EMPTY, expiration, delay_ms, early, PENDING)
    return TW_STEAL_TASK(o)


cdef void _task_dealloc(PyObject *o) noexcept:
    # TimerTask's tp_dealloc on GIL builds (installed at the end of this
    # module): the bodies of Cython's TimerTask and TimerTaskEntry deallocs
    # in one call.  Cython's test for a finalizer is left out: it only
    # fires when the slot holds Cython's own function, so never once this
    # one is installed (and TimerTask has no finalizer; a subclass's runs
    # in its own dealloc first).  tp_free parks an exact TimerTask.
    TW_TASK_CLEAR(o)
    TW_TYPE(o).tp_free(o)


cdef inline TimerTask _new_task(object fn, tuple args):
    """A new TimerTask holding ``fn(*args)``."""
    cdef TimerTask task = TimerTask.__new__(TimerTask)
    task._fn = fn
    task._args = args
    return task


cdef inline void _release(TimerTask task) noexcept:
    # Drop the callable so no cycle through this (untracked) node survives.
    if task._fn is not None:
        task._spent = True
        if <PyObject *>task._args != <PyObject *>_EMPTY:  # most tasks have none
            task._args = ()
        task._fn = None
