/* tickwheel's one shim over CPython details the compiled core relies on.
 *
 * Every CPython/Cython internal the core used was measured against a
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
 *   tw_install_freelist()  a 256-node TimerTask freelist in the type's
 *                      tp_alloc/tp_free slots (public PyTypeObject fields,
 *                      set once at import).  Without it W2-sliding costs
 *                      +4.6 %, and with the other removals +7.7 % against
 *                      main (with it: +2.7 %).  Off on free-threaded builds
 *                      (Py_GIL_DISABLED) and with -DTW_COMPAT_NO_FREELIST.
 *   tw_freelist_pop(), tw_install_dealloc()  schedule()'s task made in
 *                      place from the freelist, and TimerTask's own
 *                      tp_dealloc (a public slot, set once at import):
 *                      W1 -4.9 % in time on 3.14 (docs/design.md).  Off
 *                      where the freelist is.
 *   tw_div_by_recip()  offset // tick as a multiply-high (GCC/Clang 128-bit
 *                      integers; a division elsewhere): not a CPython
 *                      detail, a compiler's, so it lives here too.
 *   tw_type_version()  a class's version tag, the purgatory's per-class hook
 *                      cache key (without it the replay engine's loop
 *                      +11.8 %).  Before 3.13: tp_version_tag if
 *                      Py_TPFLAGS_VALID_VERSION_TAG is set, else 0; 3.13+:
 *                      tp_version_tag.  Unused on free-threaded builds.
 *   TW_COMPAT_FREE_THREADED  1 on free-threaded builds (Py_GIL_DISABLED),
 *                      reported by _wheel._compat(); the locks that stand in
 *                      for the GIL there are in _ftlock.h.
 *
 * The clock and the dict are safe on free-threaded builds (the clock has
 * no state; the dict is written once, at import, before another thread sees
 * the type); the freelist is compiled out there.  TW_COMPAT_* name the
 * decisions, for tests/test_compat_shim.py.
 */
#ifndef TICKWHEEL_COMPAT_H
#define TICKWHEEL_COMPAT_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030A0000
#error "tickwheel's compiled core needs CPython 3.10 or newer"
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

/* -- the TimerTask freelist ------------------------------------------------- */
/* Up to TW_FREELIST_MAX freed TimerTask objects are kept for the next one:
   W2-sliding (schedule + cancel + free per iteration) spends ~4 % of its
   instructions in the allocator otherwise.  Cython's @freelist refuses
   subtypes (TimerTask extends TimerTaskEntry), so the freelist sits in the
   type's tp_alloc/tp_free slots (public PyTypeObject fields), set once at
   module init by tw_install_freelist(), before any TimerTask exists:
     tp_free   parks an exact TimerTask's memory (its tp_dealloc has already
               cleared every field) instead of PyObject_Free.
     tp_alloc  hands a parked block back zeroed and PyObject_Init'ed, which
               is what PyType_GenericAlloc does for a non-GC, fixed-size type.
   Subtypes never use the array: a Python subclass gets its own slots from
   type(), and a C subtype that inherits these (_purgatory.DelayedOperation)
   is sent to PyType_GenericAlloc / PyObject_GC_Del / PyObject_Free.
   The array is a plain static: it relies on the GIL, so free-threaded
   builds (Py_GIL_DISABLED) compile without it, as does -DTW_COMPAT_NO_FREELIST
   (for measurement). */
#if defined(Py_GIL_DISABLED) || defined(TW_COMPAT_NO_FREELIST)
#define TW_COMPAT_FREELIST "none"
static inline PyObject *tw_freelist_alloc(PyTypeObject *t, Py_ssize_t n, size_t size) {
    (void)size;
    return PyType_GenericAlloc(t, n);
}
static inline int tw_install_freelist(PyTypeObject *t, allocfunc alloc, size_t size) {
    (void)t; (void)alloc; (void)size;
    return 0;
}
static inline Py_ssize_t tw_freelist_size(void) { return 0; }
static inline PyObject *tw_freelist_pop(void) { return NULL; }
static inline int tw_install_dealloc(PyTypeObject *t, destructor d) {
    (void)t; (void)d;
    return 0;
}
#else
#define TW_COMPAT_FREELIST "tp_alloc/tp_free"
#define TW_FREELIST_MAX 256
static PyObject *tw_freelist[TW_FREELIST_MAX];
static Py_ssize_t tw_freecount = 0;
static PyTypeObject *tw_freelist_type = NULL;

/* The body of the type's tp_alloc.  ``size`` is the instance size
   (tp_basicsize, checked at install): the caller passes Cython's
   sizeof(TimerTask), a constant there, so the zeroing is a few stores. */
static inline PyObject *tw_freelist_alloc(PyTypeObject *t, Py_ssize_t n, size_t size) {
    if (t == tw_freelist_type && tw_freecount > 0) {
        PyObject *o = tw_freelist[--tw_freecount];
        memset((char *)o + sizeof(PyObject), 0, size - sizeof(PyObject));
        return PyObject_Init(o, t);
    }
    return PyType_GenericAlloc(t, n);
}

static inline void tw_freelist_free(void *op) {
    PyTypeObject *t = Py_TYPE((PyObject *)op);
    if (t == tw_freelist_type) {
        if (tw_freecount < TW_FREELIST_MAX) {
            tw_freelist[tw_freecount++] = (PyObject *)op;
            return;
        }
        PyObject_Free(op);
    } else if (PyType_IS_GC(t)) {
        PyObject_GC_Del(op);
    } else {
        PyObject_Free(op);
    }
}

/* Set t's tp_alloc to ``alloc`` (a function returning tw_freelist_alloc(t,
   n, size)) and its tp_free to tw_freelist_free.  1: installed; 0: t is not
   the plain non-GC, fixed-size type of ``size`` bytes with the default
   slots these replace (nothing is changed then). */
static inline int tw_install_freelist(PyTypeObject *t, allocfunc alloc, size_t size) {
    if (tw_freelist_type != NULL || PyType_IS_GC(t) || t->tp_itemsize != 0
        || t->tp_alloc != PyType_GenericAlloc || t->tp_free != PyObject_Free
        || t->tp_basicsize != (Py_ssize_t)size || size < sizeof(PyObject)) {
        return 0;
    }
#if defined(Py_TPFLAGS_MANAGED_DICT)
    if (t->tp_flags & Py_TPFLAGS_MANAGED_DICT) { return 0; }
#endif
#if defined(Py_TPFLAGS_MANAGED_WEAKREF)
    if (t->tp_flags & Py_TPFLAGS_MANAGED_WEAKREF) { return 0; }
#endif
    tw_freelist_type = t;
    t->tp_alloc = alloc;
    t->tp_free = tw_freelist_free;
    return 1;
}

static inline Py_ssize_t tw_freelist_size(void) { return tw_freecount; }

/* A parked block as it is (not zeroed, not initialised), or NULL: for the
   schedule() path that writes every field of a new exact TimerTask itself. */
static inline PyObject *tw_freelist_pop(void) {
    return tw_freecount > 0 ? tw_freelist[--tw_freecount] : NULL;
}

/* Put ``d`` in the freelist type's tp_dealloc (public PyTypeObject field,
   set once at import like tp_alloc/tp_free): 1: installed; 0: the freelist
   is not installed on t, or t is a heap type or has a finalizer (nothing
   is changed then). */
static inline int tw_install_dealloc(PyTypeObject *t, destructor d) {
    if (t != tw_freelist_type || t->tp_finalize != NULL
        || (t->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        return 0;
    }
    t->tp_dealloc = d;
    return 1;
}
#endif

/* -- division by a level's tick ---------------------------------------------
   The bucket of a task is offset // tick on its level; the link waits for
   that division (~15 cycles).  With r = ceil(2**64 / d) it is the high half
   of n * r, exactly, for n < 2**32 and 2 <= d <= 2**32: n * r / 2**64 is
   n / d plus less than 2**-32 <= 1 / d, which cannot reach the next integer
   (tests/test_compat_shim.py checks it on the boundaries).  Compilers
   without 128-bit integers (MSVC) divide. */
#if defined(__SIZEOF_INT128__)
#define TW_COMPAT_DIVISION "multiply-high"
static inline uint64_t tw_recip(uint64_t d) {
    return d > 1 ? UINT64_MAX / d + 1 : 0;
}
static inline uint64_t tw_div_by_recip(uint64_t n, uint64_t d, uint64_t r) {
    (void)d;
    return (uint64_t)(((unsigned __int128)n * r) >> 64);
}
#else
#define TW_COMPAT_DIVISION "divide"
static inline uint64_t tw_recip(uint64_t d) { (void)d; return 0; }
static inline uint64_t tw_div_by_recip(uint64_t n, uint64_t d, uint64_t r) {
    (void)r;
    return n / d;
}
#endif

#if defined(Py_GIL_DISABLED)
#define TW_COMPAT_FREE_THREADED 1
#else
#define TW_COMPAT_FREE_THREADED 0
#endif

/* -- weak references -------------------------------------------------------- */
/* The referent of a weakref.ref as a new reference, or NULL if it is dead
   (never with an exception set): PyWeakref_GetRef on 3.13+, where
   PyWeakref_GetObject (a borrowed reference) is deprecated; 3.15 removed it
   from the headers, so it must stay behind this guard. */
static inline PyObject *tw_weakref_get(PyObject *ref) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj = NULL;
    if (PyWeakref_GetRef(ref, &obj) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);
    if (obj == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (obj == Py_None) {
        return NULL;
    }
    Py_INCREF(obj);
    return obj;
#endif
}

/* -- a class's version tag ----------------------------------------------------- */
/* The purgatory caches, per Python class, which hooks it may call in C
   (_purgatory.pyx, "calling the hooks"), keyed by the class's version tag,
   which CPython replaces whenever the class or a base changes; 0: none now.
   tp_version_tag is a PyTypeObject field documented for internal use.
   Before 3.13 a change cleared Py_TPFLAGS_VALID_VERSION_TAG and could leave
   the old number, so the flag is tested; 3.13 no longer sets the flag (a
   tag is valid iff it is not 0).  Without the cache the replay engine's
   loop costs +11.8 % (DelayedProduce is a Python class that overrides no
   hook); a subclass that overrides its hooks pays 1.6 % for the check. */
#if PY_VERSION_HEX < 0x030D0000
#define TW_COMPAT_TYPE_VERSION "tp_version_tag+flag"
static inline unsigned int tw_type_version(PyTypeObject *t) {
    return PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG) ? t->tp_version_tag : 0u;
}
#else
#define TW_COMPAT_TYPE_VERSION "tp_version_tag"
static inline unsigned int tw_type_version(PyTypeObject *t) { return t->tp_version_tag; }
#endif

#endif /* TICKWHEEL_COMPAT_H */
