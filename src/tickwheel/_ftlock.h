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
 * tw_atomic_add_ssize/_load_ssize/_store_ssize: atomic on free-threaded
 * builds (GCC/Clang __atomic builtins; MSVC: Interlocked), plain otherwise.
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
/* Padding that keeps a contended lock alone on its cache line (64 bytes on
 * x86-64 and most ARM64; Apple's 128-byte lines get half the benefit). */
typedef struct { char b[64]; } tw_line_pad;
#if defined(__GNUC__) || defined(__clang__)
/* The critical sections behind these locks are a few hundred instructions
 * (a bucket link or unlink, a dict update), so a thread that finds the lock
 * taken spins briefly with the CPU's pause hint before it calls
 * PyMutex_Lock, whose own spin (3.13) makes a sched_yield system call per
 * round and then parks: with two threads on two cores that cost several
 * times the critical section.  Spinning first speeds up the purgatory on
 * two threads; the bound on the rounds keeps a shared timer from losing
 * to it (docs/freethreading.md has the measurements, from
 * bench/bench_freethreading.py).
 * Taking it is PyMutex's own compare-and-swap of the byte from a value
 * without _Py_LOCKED (bit 0) to the same value with it, as its slow path
 * does: a thread may take the lock while others are parked on it (the
 * _Py_HAS_PARKED bit stays set, so PyMutex_Unlock still wakes one), so the
 * lock stays a PyMutex.  (Trying only from 0 would make every acquire
 * spin all its rounds, then call PyMutex_Lock, whenever a thread is parked.)
 * (_bits is PyMutex's one field, in cpython/lock.h on 3.13-3.14 and
 * cpython/pylock.h on 3.15; renamed, it would fail the build.) */
#ifndef TW_SPIN
#define TW_SPIN 32
#endif
static inline int tw_try_lock(tw_mutex *m) {
    uint8_t v = __atomic_load_n(&m->_bits, __ATOMIC_RELAXED);
    return (v & 1) == 0 &&
           __atomic_compare_exchange_n(&m->_bits, &v, (uint8_t)(v | 1), 0,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}
static inline void tw_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
static void tw_lock_contended(tw_mutex *m) {
    for (int i = 0; i < TW_SPIN; i++) {
        tw_cpu_relax();
        if ((__atomic_load_n(&m->_bits, __ATOMIC_RELAXED) & 1) == 0 && tw_try_lock(m))
            return;
    }
    PyMutex_Lock(m);
}
static inline void tw_lock(tw_mutex *m) {
    if (!tw_try_lock(m))
        tw_lock_contended(m);
}
#else
static inline void tw_lock(tw_mutex *m) { PyMutex_Lock(m); }
#endif
static inline void tw_unlock(tw_mutex *m) { PyMutex_Unlock(m); }
#if defined(_MSC_VER)
#include <intrin.h>
static inline void tw_atomic_add_ssize(Py_ssize_t *p, Py_ssize_t v) {
    _InterlockedExchangeAdd64((volatile __int64 *)p, (__int64)v);
}
static inline Py_ssize_t tw_atomic_load_ssize(Py_ssize_t *p) {
    return (Py_ssize_t)_InterlockedOr64((volatile __int64 *)p, 0);
}
static inline void tw_atomic_store_ssize(Py_ssize_t *p, Py_ssize_t v) {
    _InterlockedExchange64((volatile __int64 *)p, (__int64)v);
}
#else
static inline void tw_atomic_add_ssize(Py_ssize_t *p, Py_ssize_t v) {
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline Py_ssize_t tw_atomic_load_ssize(Py_ssize_t *p) {
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}
static inline void tw_atomic_store_ssize(Py_ssize_t *p, Py_ssize_t v) {
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
#endif
/* Fields written under a timer's lock but read without it (a task's bucket
 * pointer, which finds that lock; a task's state; the manual clock) are
 * written and read with these atomic accesses, so the unlocked reads are
 * not data races (ThreadSanitizer: docs/reliability.md).  Relaxed order for
 * the byte and the clock, whose readers re-check under the lock or only
 * report them; release/acquire for the pointer. */
#if defined(_MSC_VER)
#define tw_load_ptr(pp) (*(void *volatile *)(pp))
#define tw_store_ptr(pp, v) ((void)(*(void *volatile *)(pp) = (void *)(v)))
#define tw_load_u8(p) (*(volatile unsigned char *)(p))
#define tw_store_u8(p, v) ((void)(*(volatile unsigned char *)(p) = (v)))
#define tw_load_ul(p) (*(volatile unsigned long *)(p))
#define tw_store_ul(p, v) ((void)(*(volatile unsigned long *)(p) = (v)))
#define tw_load_i64(p) (*(volatile int64_t *)(p))
#define tw_store_i64(p, v) ((void)(*(volatile int64_t *)(p) = (v)))
#else
#define tw_load_ptr(pp) ((void *)__atomic_load_n((pp), __ATOMIC_ACQUIRE))
#define tw_store_ptr(pp, v) __atomic_store_n((pp), (v), __ATOMIC_RELEASE)
#define tw_load_u8(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define tw_store_u8(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define tw_load_ul(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define tw_store_ul(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define tw_load_i64(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define tw_store_i64(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#endif
#else
#define TW_FT_LOCKS 0
typedef struct { char unused; } tw_mutex;
typedef struct { char unused; } tw_line_pad;
#define tw_lock(m) ((void)0)
#define tw_unlock(m) ((void)0)
#define tw_atomic_add_ssize(p, v) ((void)(*(p) += (v)))
#define tw_atomic_load_ssize(p) (*(p))
#define tw_atomic_store_ssize(p, v) ((void)(*(p) = (v)))
#define tw_load_ptr(pp) ((void *)*(pp))
#define tw_store_ptr(pp, v) ((void)(*(pp) = (v)))
#define tw_load_u8(p) (*(p))
#define tw_store_u8(p, v) ((void)(*(p) = (v)))
#define tw_load_ul(p) (*(p))
#define tw_store_ul(p, v) ((void)(*(p) = (v)))
#define tw_load_i64(p) (*(p))
#define tw_store_i64(p, v) ((void)(*(p) = (v)))
#endif

/* tw_cas_u8: compare-and-swap of a byte (a laned timer's claim on a task);
 * tw_cpu_pause: the CPU's pause hint, for spinning on one. */
#if TW_FT_LOCKS && defined(_MSC_VER)
static inline int tw_cas_u8(unsigned char *p, unsigned char expected, unsigned char desired) {
    return (unsigned char)_InterlockedCompareExchange8((volatile char *)p, (char)desired,
                                                       (char)expected) == expected;
}
#define tw_cpu_pause() ((void)0)
#elif TW_FT_LOCKS
static inline int tw_cas_u8(unsigned char *p, unsigned char expected, unsigned char desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}
#if defined(__x86_64__) || defined(__i386__)
#define tw_cpu_pause() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define tw_cpu_pause() __asm__ __volatile__("yield")
#else
#define tw_cpu_pause() ((void)0)
#endif
#else  /* with a GIL, one thread at a time */
static inline int tw_cas_u8(unsigned char *p, unsigned char expected, unsigned char desired) {
    if (*p != expected)
        return 0;
    *p = desired;
    return 1;
}
#define tw_cpu_pause() ((void)0)
#endif

/* A thread's lane number (TimerCore._use_lanes, _wheel.pxd "Lanes"): handed
 * out the first time a thread asks, counting up across the process, so the
 * first threads that add to a laned timer land in different lanes (lane =
 * number % lanes).  Thread-local, so asking again is one load. */
#if defined(_MSC_VER)
#define TW_THREAD_LOCAL __declspec(thread)
#else
#define TW_THREAD_LOCAL _Thread_local
#endif
static TW_THREAD_LOCAL Py_ssize_t tw_lane_number = -1;
static Py_ssize_t tw_lanes_handed_out = 0;
static inline Py_ssize_t tw_thread_lane(void) {
    Py_ssize_t k = tw_lane_number;
    if (k < 0) {
#if TW_FT_LOCKS && defined(_MSC_VER)
        k = (Py_ssize_t)_InterlockedExchangeAdd64(
            (volatile __int64 *)&tw_lanes_handed_out, 1);
#elif TW_FT_LOCKS
        k = __atomic_fetch_add(&tw_lanes_handed_out, 1, __ATOMIC_RELAXED);
#else
        k = tw_lanes_handed_out++;  /* under the GIL */
#endif
        tw_lane_number = k;
    }
    return k;
}

#endif /* TICKWHEEL_FTLOCK_H */
