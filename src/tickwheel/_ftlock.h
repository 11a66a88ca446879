/* tickwheel's locks for free-threaded CPython (PEP 703), compiled out with a GIL.
 *
 * On a free-threaded build (Py_GIL_DISABLED) a tw_mutex is a PyMutex (public C
 * API since 3.13: one byte, zero = unlocked, no allocation; a contended lock
 * parks the thread and detaches it, so a stop-the-world GC never waits for
 * it).  On a GIL build the structures are serialised by the GIL (the compiled
 * code runs no Python code half-way through a mutation, _wheel.pxd), so the
 * lock is an empty byte and tw_lock/tw_unlock compile to nothing: the GIL
 * builds run the very instructions they ran before (bench/callgrind_*.py).
 *
 * tw_atomic_add_ssize: an atomic add on free-threaded builds (GCC/Clang
 * __atomic builtins; MSVC: Interlocked), a plain add otherwise.
 *
 * Only C API that 3.13t already has is used (PyMutex_Lock/PyMutex_Unlock).
 * The lock protocols that use these are written next to their code:
 * _wheel.pxd ("Thread-safety contract") and _purgatory.pyx (_Lock).
 */
#ifndef TICKWHEEL_FTLOCK_H
#define TICKWHEEL_FTLOCK_H

#include <Python.h>

#if defined(Py_GIL_DISABLED)
#define TW_FT_LOCKS 1
typedef PyMutex tw_mutex;
static inline void tw_lock(tw_mutex *m) { PyMutex_Lock(m); }
static inline void tw_unlock(tw_mutex *m) { PyMutex_Unlock(m); }
#if defined(_MSC_VER)
#include <intrin.h>
static inline void tw_atomic_add_ssize(Py_ssize_t *p, Py_ssize_t v) {
    _InterlockedExchangeAdd64((volatile __int64 *)p, (__int64)v);
}
static inline Py_ssize_t tw_atomic_load_ssize(Py_ssize_t *p) {
    return (Py_ssize_t)_InterlockedOr64((volatile __int64 *)p, 0);
}
#else
static inline void tw_atomic_add_ssize(Py_ssize_t *p, Py_ssize_t v) {
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline Py_ssize_t tw_atomic_load_ssize(Py_ssize_t *p) {
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
#endif
#else
#define TW_FT_LOCKS 0
typedef struct { char unused; } tw_mutex;
#define tw_lock(m) ((void)0)
#define tw_unlock(m) ((void)0)
#define tw_atomic_add_ssize(p, v) ((void)(*(p) += (v)))
#define tw_atomic_load_ssize(p) (*(p))
#endif

#endif /* TICKWHEEL_FTLOCK_H */
