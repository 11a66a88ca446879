/* tickwheel's one shim over CPython details the compiled core relies on.
 *
 * Issue 18 measured every CPython/Cython internal the core used against a
 * public-API variant (callgrind instructions per iteration; docs/design.md
 * "CPython internals" has the table).  Only those worth more than 5 % on W1,
 * W2-sliding or the purgatory stayed, and their version guards live here:
 *
 *   tw_monotonic_ns()  the timer's clock read in C (calling time.monotonic_ns
 *                      instead costs W1 +18.6 %, W2 +16.2 %).  Linux:
 *                      clock_gettime(CLOCK_MONOTONIC), the clock
 *                      time.monotonic_ns() reads there.  Elsewhere on 3.13+:
 *                      PyTime_MonotonicRaw (public).  Elsewhere before 3.13
 *                      there is no public C call: TW_HAVE_C_CLOCK is 0 and
 *                      the core calls time.monotonic_ns().
 *   tw_type_dict()     the type's dict, to install the METH_FASTCALL
 *                      schedule()/schedule_as() descriptors (Cython's def
 *                      builds a **kwargs dict per call: W1 +17.5 %, W2
 *                      +15.3 %).  3.12+: PyType_GetDict (public); before:
 *                      tp_dict.
 *   TW_COMPAT_FREE_THREADED  for _purgatory, whose _Lock uses the GIL as
 *                      its mutex (a PyThread lock costs the purgatory
 *                      +5.7 %): it refuses to import with the GIL disabled.
 *
 * Both functions are safe on free-threaded builds (the clock has no state;
 * the dict is written once, at import, before another thread sees the
 * type).  TW_COMPAT_* name the decisions, for tests/test_compat_shim.py.
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

/* TW_COMPAT_NO_CLOCK_GETTIME (a -D for testing only) builds the other
   branches on Linux too. */
#if defined(__linux__) && defined(CLOCK_MONOTONIC) && !defined(TW_COMPAT_NO_CLOCK_GETTIME)
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
