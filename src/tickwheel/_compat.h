/* tickwheel's one shim over CPython details the compiled core relies on.
 *
 * Issue 18 measured every CPython/Cython internal the core used against a
 * public-API variant (callgrind instructions, docs/design.md "CPython
 * internals"); only the two worth more than 5 % on W1, W2-sliding or the
 * purgatory stayed, and they live here, behind version guards:
 *
 *   tw_monotonic_ns()  the timer's clock read in C (W1 -16 %, W2 -14 %
 *                      against calling time.monotonic_ns).  Linux:
 *                      clock_gettime(CLOCK_MONOTONIC), the clock
 *                      time.monotonic_ns() reads there.  Elsewhere on 3.13+:
 *                      PyTime_MonotonicRaw (public).  Elsewhere before 3.13
 *                      there is no public C call: TW_HAVE_C_CLOCK is 0 and the
 *                      core calls time.monotonic_ns().
 *   tw_type_dict()     the type's dict, to install the METH_FASTCALL
 *                      schedule()/schedule_as() descriptors (W1 -15 %, W2 -13 %
 *                      against Cython's def, which builds a **kwargs dict per
 *                      call).  3.12+: PyType_GetDict (public); before: tp_dict.
 *
 * Free-threaded builds (Py_GIL_DISABLED): both are safe (the clock has no
 * state; the dict is written once, at import, before any other thread can
 * see the type).  What the core no longer does is listed in design.md.
 * TW_COMPAT_* below name the decisions, for tests/test_compat_shim.py.
 */
#ifndef TICKWHEEL_COMPAT_H
#define TICKWHEEL_COMPAT_H

#include <Python.h>
#include <stdint.h>

#if PY_VERSION_HEX < 0x03090000
#error "tickwheel's compiled core needs CPython 3.9 or newer"
#endif
#if defined(PYPY_VERSION) || defined(Py_LIMITED_API)
#error "tickwheel's compiled core needs CPython's full C API (no PyPy, no limited API)"
#endif

/* -- the clock -------------------------------------------------------------- */
#if defined(__linux__)
#include <time.h>
#endif

#if defined(__linux__) && defined(CLOCK_MONOTONIC)
#define TW_HAVE_C_CLOCK 1
#define TW_COMPAT_CLOCK "clock_gettime"
static inline int64_t tw_monotonic_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) { return -1; }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
#elif PY_VERSION_HEX >= 0x030D0000
#define TW_HAVE_C_CLOCK 1
#define TW_COMPAT_CLOCK "PyTime_MonotonicRaw"
static inline int64_t tw_monotonic_ns(void) {
    PyTime_t t;
    if (PyTime_MonotonicRaw(&t) < 0) { return -1; }
    return (int64_t)t;
}
#else
#define TW_HAVE_C_CLOCK 0
#define TW_COMPAT_CLOCK "time.monotonic_ns"
static inline int64_t tw_monotonic_ns(void) { return -1; } /* never called */
#endif

/* -- the type's dict -------------------------------------------------------- */
/* A new reference to the type's attribute dict, or NULL with an exception. */
#if PY_VERSION_HEX >= 0x030C0000
#define TW_COMPAT_TYPE_DICT "PyType_GetDict"
static inline PyObject *tw_type_dict(PyTypeObject *t) { return PyType_GetDict(t); }
#else
#define TW_COMPAT_TYPE_DICT "tp_dict"
static inline PyObject *tw_type_dict(PyTypeObject *t) {
    PyObject *d = t->tp_dict;
    if (d == NULL) {
        PyErr_SetString(PyExc_SystemError, "type has no dict");
        return NULL;
    }
    Py_INCREF(d);
    return d;
}
#endif

#if defined(Py_GIL_DISABLED)
#define TW_COMPAT_FREE_THREADED 1
#else
#define TW_COMPAT_FREE_THREADED 0
#endif

#endif /* TICKWHEEL_COMPAT_H */
