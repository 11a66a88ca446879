# _wheel_fastcall.pxi: included by _wheel.pyx (one extension module).
# The fast-call paths: schedule, schedule_as and TimerTask.cancel as
# METH_FASTCALL / METH_NOARGS methods installed in the types' dicts; each
# checks its arguments and hands the task to placement (_wheel_place.pxi).
# Calls: place, lanes (_thread_lane), task (_task_cancel).

# -- METH_FASTCALL schedule ---------------------------------------------------
# Cython builds a fresh dict for **kwargs on every call of a def method, even
# with no keywords, and a bound CyFunction adds its own call adapter.  This
# replaces TimerCore.schedule with a METH_FASTCALL | METH_KEYWORDS method
# descriptor (public C API) that builds the dict only when keywords are
# given, written into the type's dict at import through _compat.h's
# tw_type_dict: Cython's def costs W1 and W2-sliding about a sixth more
# (docs/design.md, "CPython internals", has the measurements).  The table
# at the end of _wheel.pyx installs every such method.

from cpython.tuple cimport PyTuple_GET_SIZE


cdef extern from "Python.h":
    ctypedef struct PyMethodDef:
        const char *ml_name
        void *ml_meth
        int ml_flags
        const char *ml_doc
    enum:
        METH_FASTCALL
        METH_KEYWORDS
        METH_NOARGS
    object PyDescr_NewMethod(PyTypeObject *type, PyMethodDef *meth)
    void PyType_Modified(PyTypeObject *type)


cdef object _schedule_fastcall(object self, PyObject **args, Py_ssize_t nargs,
                               PyObject *kwnames):
    cdef Py_ssize_t i, nkw
    cdef long long small
    if nargs == 2 and (kwnames is NULL or PyTuple_GET_SIZE(<object>kwnames) == 0):
        # schedule(delay_ms, fn): the arguments stay borrowed, no tuple.
        if not TW_CALLABLE(args[1]):
            raise TypeError(f"fn must be callable, got {<object>args[1]!r}")
        if (not TW_FT_LOCKS and (<TimerCore>self)._lanes is None
                and TW_INT_EXACT(args[0]) and _int_ms(args[0], &small)):
            return _schedule_small(<TimerCore>self, small, args[1])
        return _schedule_as(_thread_lane(<TimerCore>self), TimerTask, <object>args[0],
                            <object>args[1], _EMPTY)
    cdef dict kwargs = None
    if nargs < 2:
        raise TypeError(
            f"schedule() takes delay_ms and fn positionally ({nargs} given)"
        )
    fn = <object>args[1]
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    cdef tuple rest = _EMPTY
    if nargs > 2:
        rest = tuple([<object>args[i] for i in range(2, nargs)])
    if kwnames is not NULL:
        nkw = PyTuple_GET_SIZE(<object>kwnames)
        if nkw:
            kwargs = {}
            for i in range(nkw):
                kwargs[(<tuple>kwnames)[i]] = <object>args[nargs + i]
    if kwargs is not None:
        fn = _partial(fn, *rest, **kwargs)
        rest = _EMPTY
    return _schedule_as(_thread_lane(<TimerCore>self), TimerTask, <object>args[0], fn, rest)


cdef object _schedule_as_fastcall(object self, PyObject **args, Py_ssize_t nargs,
                                  PyObject *kwnames):
    cdef Py_ssize_t i
    if kwnames is not NULL and PyTuple_GET_SIZE(<object>kwnames):
        raise TypeError("schedule_as() takes no keyword arguments")
    if nargs < 3:
        raise TypeError(
            f"schedule_as() takes task_type, delay_ms and fn positionally ({nargs} given)"
        )
    task_type = <object>args[0]
    if not (PyType_Check(task_type)
            and PyType_IsSubtype(<type>task_type, TimerTask)):
        raise TypeError(f"task_type must be a TimerTask subclass, got {task_type!r}")
    fn = <object>args[2]
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    cdef tuple rest = _EMPTY
    if nargs > 3:
        rest = tuple([<object>args[i] for i in range(3, nargs)])
    return _schedule_as(_thread_lane(<TimerCore>self), task_type, <object>args[1], fn, rest)


cdef tuple _EMPTY = ()
# The method tables, and the bytes their names and docstrings point into,
# live as long as the module.
cdef PyMethodDef _schedule_def, _schedule_as_def, _loop_call_later_def, _loop_call_at_def
cdef PyMethodDef _cancel_def
cdef list _FASTCALL_STRINGS = []
# (type name, method name, signature) of every method installed so far.
cdef list _INSTALLED = []


cdef int _install_fastcall(PyMethodDef *d, str name, void *meth, str signature) except -1:
    # TimerCore.<name> becomes a METH_FASTCALL | METH_KEYWORDS method
    # descriptor.
    return _install_method(<PyTypeObject *>TimerCore, d, name, meth,
                           METH_FASTCALL | METH_KEYWORDS, signature)


cdef int _install_method(PyTypeObject *t, PyMethodDef *d, str name, void *meth,
                         int flags, str signature) except -1:
    # <type>.<name> becomes a C method descriptor of these flags, with the
    # docstring of the class body's def (help() and inspect.signature read
    # the signature line).
    cdef bytes name_b = name.encode()
    cdef bytes doc = (
        f"{name}({signature})\n--\n\n" + getattr(<object>t, name).__doc__
    ).encode()
    _FASTCALL_STRINGS.extend((name_b, doc))
    d.ml_name = name_b
    d.ml_meth = meth
    d.ml_flags = flags
    d.ml_doc = doc
    _INSTALLED.append(((<object>t).__name__, name, signature))
    cdef dict tp_dict = tw_type_dict(t)
    tp_dict[name] = PyDescr_NewMethod(t, d)
    PyType_Modified(t)
    return 0




cdef object _cancel_noargs(object self, PyObject *unused):
    # TimerTask.cancel as METH_NOARGS (the descriptor has checked the type).
    return _task_cancel(<TimerTask>self)
