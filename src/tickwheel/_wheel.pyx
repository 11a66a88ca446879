# cython: freethreading_compatible=True
"""Compiled core of tickwheel: buckets, timing wheels, bucket queue, timer core.

See ``_wheel.pxd`` for the design picture and the thread-safety contract, and
``_wheel_py.py`` for the pure-Python twin that mirrors every name here.
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


@cython.cdivision(True)
cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    # Python's floor division for b > 0 (C truncates toward zero).
    cdef int64_t q = a / b
    if a % b != 0 and a < 0:
        q -= 1
    return q


cdef inline int64_t _ceil_to(int64_t a, int64_t b) noexcept nogil:
    return -_floordiv(-a, b) * b


cdef int64_t _check_time(object value, str name) except? -1:
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {value!r}")
    result = _index(value)
    if not -C_MAX_TIME_MS <= result <= C_MAX_TIME_MS:
        raise OverflowError(f"{name}={value!r} is out of range")
    return result


cdef int64_t _check_positive(object value, str name, int64_t minimum) except? -1:
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} must be an int, got {value!r}")
    result = _index(value)
    if result < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if result > 2**62:
        raise OverflowError(f"{name}={value!r} is out of range")
    return result


cdef _check_reach(int64_t tick_ms, object wheel_size):
    # Every deadline in the clock range must fit some level: an overflow wheel
    # whose interval would pass 2**62 ms cannot be built, and finding that out
    # half-way through an add would lose the task being moved.
    span = tick_ms * wheel_size
    while span <= 8 * C_MAX_TIME_MS:
        if span * wheel_size > 2**62:
            raise ValueError(
                f"tick_ms={tick_ms} with wheel_size={wheel_size} cannot reach "
                f"MAX_DELAY_MS (overflow wheels would pass 2**62 ms); "
                "use a smaller wheel_size or tick_ms"
            )
        span *= wheel_size


cdef int _past_clock_end(object delay_ms, int64_t now_ms) except -1:
    raise OverflowError(
        f"delay_ms={delay_ms!r} from now_ms={now_ms} puts the deadline past "
        f"the end of the clock range ({C_MAX_EXPIRATION_MS} ms)"
    )


cdef extern from *:
    """
    /* An int of one digit (|v| < 2**30; 3.12+ public unstable API): its
       value without a call.  Every such value is a valid delay in ms. */
    #if PY_VERSION_HEX >= 0x030C0000
    #define TW_SMALL_INT(o, out) \
        (PyUnstable_Long_IsCompact((PyLongObject *)(o)) \
         ? (*(out) = (long long)PyUnstable_Long_CompactValue((PyLongObject *)(o)), 1) \
         : 0)
    #else
    #define TW_SMALL_INT(o, out) 0
    #endif
    """
    bint TW_SMALL_INT(PyObject *o, long long *out) noexcept
    bint TW_INT_EXACT "PyLong_CheckExact"(PyObject *o) noexcept


cdef inline bint _int_ms(PyObject *delay_ms, long long *out) noexcept:
    # An exact int's value, True iff it is a valid delay in ms (one-digit
    # ints without a call on 3.12+: 2**30 ms < C_MAX_DELAY_MS).
    cdef int overflow = 0
    if TW_SMALL_INT(delay_ms, out):
        return True
    out[0] = PyLong_AsLongLongAndOverflow(<object>delay_ms, &overflow)
    return overflow == 0 and -C_MAX_DELAY_MS <= out[0] <= C_MAX_DELAY_MS


cdef int64_t _delay_to_ns(object delay_ms, TimerTask task=None) except? -1:
    """Validate a delay in milliseconds and return it in nanoseconds (rounded up).

    With ``task``, also store the delay on it (as given: int or float).
    """
    cdef long long value
    cdef double d
    if type(delay_ms) is int:
        if _int_ms(<PyObject *>delay_ms, &value):
            if task is not None:
                task._delay_ms = <double>value
                task._delay_is_int = True
            return value * NS_PER_MS
        raise OverflowError(
            f"delay_ms={delay_ms!r} is out of range [-{MAX_DELAY_MS}, {MAX_DELAY_MS}]"
        )
    if type(delay_ms) is float:
        d = delay_ms
    elif isinstance(delay_ms, bool):
        raise TypeError(f"delay_ms must be a number of milliseconds, got {delay_ms!r}")
    elif hasattr(type(delay_ms), "__index__"):
        return _delay_to_ns(_index(delay_ms), task)
    elif not isinstance(delay_ms, _Real):
        raise TypeError(f"delay_ms must be a number of milliseconds, got {delay_ms!r}")
    else:
        d = float(delay_ms)
    if isnan(d) or isinf(d):
        raise ValueError(f"delay_ms must be finite, got {delay_ms!r}")
    if not -<double>C_MAX_DELAY_MS <= d <= <double>C_MAX_DELAY_MS:
        raise OverflowError(
            f"delay_ms={delay_ms!r} is out of range [-{MAX_DELAY_MS}, {MAX_DELAY_MS}]"
        )
    if task is not None:
        task._delay_ms = d
        task._delay_is_int = False
    return <int64_t>ceil(d * <double>NS_PER_MS)


# A new TimerTask comes from its type's own tp_new (Cython's, called in C by
# TimerTask.__new__), except schedule()'s on GIL builds (_made_task, below);
# its memory comes from _compat.h's freelist (tp_alloc/tp_free, installed at
# the end of this module; docs/design.md "CPython internals").
cdef extern from "Python.h":
    # On borrowed pointers (Cython's Py_INCREF/Py_DECREF take objects).
    void TW_INCREF "Py_INCREF"(PyObject *o) noexcept
    void TW_DECREF "Py_DECREF"(PyObject *o) noexcept


cdef extern from *:
    """
    /* PyCallable_Check's body, inline (the same test on 3.9-3.15). */
    #define TW_CALLABLE(o) (Py_TYPE(o)->tp_call != NULL)
    """
    bint TW_CALLABLE(PyObject *o) noexcept


cdef extern from *:
    """
    /* A borrowed list item through a borrowed list pointer (no refcounting). */
    #define TW_LIST_ITEM(l, i) PyList_GET_ITEM((l), (i))
    /* A list's item array (valid until the list is resized). */
    #define TW_LIST_ITEMS(l) (((PyListObject *)(l))->ob_item)

    /* Does this TimerTask subtype keep TimerTask's tp_new (any Python
       subclass without __new__)?  Then it is made as TimerTask is, and
       _add's checks for a re-added task are skipped; see
       TimerCore._schedule_as. */
    static int tw_keeps_task_new(PyObject *t, PyObject *base) {
        return ((PyTypeObject *)t)->tp_new == ((PyTypeObject *)base)->tp_new;
    }
    /* A new instance through the type's tp_new, without the generic call
       adapter of type.__call__ / cls.__new__ (~400 instructions). */
    static PyObject *tw_new_instance(PyObject *t) {
        PyObject *args = PyTuple_New(0), *o;
        if (args == NULL) { return NULL; }
        o = ((PyTypeObject *)t)->tp_new((PyTypeObject *)t, args, NULL);
        Py_DECREF(args);
        return o;
    }
    """
    PyObject *TW_LIST_ITEM(PyObject *l, Py_ssize_t i)
    PyObject **TW_LIST_ITEMS(PyObject *l)
    object tw_new_instance(object t)
    int tw_keeps_task_new(object t, object base)


cdef extern from *:
    """
    /* An exact TimerTask made in place by schedule() on a GIL build: every
       field written once (no zeroing, no None written and replaced); the
       struct is Cython's (TW_ENTRY_LIST_SLOT's naming). */
    #define TW_TASK_FILL(o, fn, args, expiration, delay_ms, early, state) do { \
        struct __pyx_obj_9tickwheel_6_wheel_TimerTask *t_ = \
            (struct __pyx_obj_9tickwheel_6_wheel_TimerTask *)(o); \
        t_->__pyx_base._expiration_ms = (expiration); \
        t_->__pyx_base._prev = NULL; \
        t_->__pyx_base._next = NULL; \
        Py_INCREF(Py_None); \
        t_->__pyx_base._list = (void *)Py_None; \
        Py_INCREF(fn); \
        t_->_fn = (fn); \
        Py_INCREF(args); \
        t_->_args = (args); \
        t_->_delay_ms = (double)(delay_ms); \
        t_->_state = (state); \
        t_->_spent = 0; \
        t_->_delay_is_int = 1; \
        t_->_claim = 0; \
        t_->_early_ns = (early); \
    } while (0)
    /* The bodies of TimerTask's and TimerTaskEntry's tp_dealloc in one
       (Cython's, without their finalizer test). */
    #define TW_TASK_CLEAR(o) do { \
        struct __pyx_obj_9tickwheel_6_wheel_TimerTask *t_ = \
            (struct __pyx_obj_9tickwheel_6_wheel_TimerTask *)(o); \
        Py_CLEAR(t_->_fn); \
        Py_CLEAR(t_->_args); \
        Py_CLEAR(t_->__pyx_base._list); \
    } while (0)
    """
    void TW_TASK_FILL(PyObject *o, PyObject *fn, PyObject *args, int64_t expiration,
                      long long delay_ms, unsigned int early, unsigned char state) noexcept
    void TW_TASK_CLEAR(PyObject *o) noexcept
    # A new reference handed over as it is (no reference count change).
    TimerTask TW_STEAL_TASK "(PyObject *)"(PyObject *o)
    PyObject *PyObject_Init(PyObject *o, PyTypeObject *t) noexcept
    void *PyObject_Malloc(size_t n) noexcept
    PyTypeObject *TW_TYPE "Py_TYPE"(PyObject *o) noexcept


cdef inline TimerTask _made_task(PyObject *fn, int64_t expiration, long long delay_ms,
                                 unsigned int early):
    # schedule()'s new exact TimerTask on a GIL build (no free-threaded
    # caller: the freelist is compiled out there): what TimerTask.__new__
    # and the field assignments of _schedule_new give, from the freelist
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


cdef extern from *:
    """
    /* The address of a TimerTaskEntry's _list slot, for tw_load_ptr and
       tw_store_ptr (Cython refuses the address of an object attribute).
       The struct is Cython's, under the name it has generated for a cdef
       class since 0.x (__pyx_obj_ + module + class): a new scheme would
       fail this build, not miscompile it. */
    #define TW_ENTRY_LIST_SLOT(e) \
        ((void **)&((struct __pyx_obj_9tickwheel_6_wheel_TimerTaskEntry *)(e))->_list)
    """
    void **TW_ENTRY_LIST_SLOT(TimerTaskEntry e) noexcept


cdef extern from *:
    """
    /* A bucket is its ring's sentinel (_wheel.pxd): its _tail and _head
       must sit where an entry keeps _prev and _next.  A build whose layout
       differs stops here (a negative array size), before it could run. */
    #define TW_BUCKET_RING_CHECK() ((void)sizeof(char[ \
        (offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskList, _tail) \
         == offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskEntry, _prev) \
         && offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskList, _head) \
         == offsetof(struct __pyx_obj_9tickwheel_6_wheel_TimerTaskEntry, _next)) \
        ? 1 : -1]))
    """
    void TW_BUCKET_RING_CHECK() noexcept

TW_BUCKET_RING_CHECK()


cdef extern from *:
    """
    /* Move a task's callable out of it: *out gets the task's own reference
       and the field holds None (a macro: the struct is defined after this
       block; TW_ENTRY_LIST_SLOT's naming). */
    #define TW_TASK_TAKE_FN(t, out) do { \
        struct __pyx_obj_9tickwheel_6_wheel_TimerTask *t_ = \
            (struct __pyx_obj_9tickwheel_6_wheel_TimerTask *)(t); \
        *(out) = t_->_fn; \
        Py_INCREF(Py_None); \
        t_->_fn = Py_None; \
    } while (0)
    """
    void TW_TASK_TAKE_FN(TimerTask t, PyObject **out) noexcept


cdef inline void _set_list(TimerTaskEntry entry, TimerTaskList bucket) noexcept:
    # ``entry._list = bucket`` as an atomic store: _lock_list reads the slot
    # without the lock (_ftlock.h; a plain store with a GIL).
    cdef PyObject *old = <PyObject *>entry._list
    TW_INCREF(<PyObject *>bucket)
    tw_store_ptr(TW_ENTRY_LIST_SLOT(entry), <void *>bucket)
    TW_DECREF(old)


cdef inline void _link_tail(TimerTaskList bucket, TimerTaskEntry entry) noexcept:
    # TimerTaskList._link: the bucket takes a reference to the entry (the
    # ring's); the links themselves are borrowed pointers.
    cdef PyObject *tail = bucket._tail
    entry._next = <PyObject *>bucket
    entry._prev = tail
    _set_list(entry, bucket)
    (<TimerTaskEntry>tail)._next = <PyObject *>entry
    bucket._tail = <PyObject *>entry
    TW_INCREF(<PyObject *>entry)
    bucket._size += 1
    tw_atomic_add_ssize(&bucket._counter.value, 1)


cdef inline void _unlink_entry(TimerTaskList bucket, TimerTaskEntry entry) noexcept:
    # TimerTaskList._unlink.  Drops the ring's reference last: the caller
    # holds its own (a Cython argument is a borrowed reference its caller
    # keeps alive), so the entry is never freed here.  The bucket is not
    # touched after the entry lets go of it: a bucket linked by hand
    # (TimerTaskList.add) may have had no other owner, and TimerTask.cancel
    # passes it borrowed.
    cdef PyObject *prev = entry._prev
    cdef PyObject *nxt = entry._next
    (<TimerTaskEntry>prev)._next = nxt
    (<TimerTaskEntry>nxt)._prev = prev
    entry._prev = NULL
    entry._next = NULL
    bucket._size -= 1
    tw_atomic_add_ssize(&bucket._counter.value, -1)
    _set_list(entry, None)
    TW_DECREF(<PyObject *>entry)


cdef inline PyObject *_list_of(TimerTaskEntry entry) noexcept:
    # ``entry._list`` read without its timer's lock (an atomic load), as a
    # borrowed pointer (Py_None for no bucket).
    return <PyObject *>tw_load_ptr(TW_ENTRY_LIST_SLOT(entry))


cdef inline unsigned char _state_of(TimerTask task) noexcept:
    # ``task._state`` read without its timer's lock (an atomic load).
    return tw_load_u8(&task._state)


cdef PyObject *_lock_list(TimerTaskEntry entry) noexcept:
    """Free-threaded builds: lock the timer ``entry`` is linked in or expired by.

    Returns its bucket (``entry._list``, borrowed) with ``_list._counter._mu``
    held, or NULL (no timer's lock held) if the entry is in no bucket.  The
    first read of ``_list`` is unlocked: the entry moves only under that
    lock, so it is read again under it and the loop retries if it changed.

    No reference is taken: a bucket lives as long as its timer (the wheel
    owns its buckets, the TimerCore its expired list), so the pointer stays
    valid whatever the entry does meanwhile.  Taking one would be an atomic
    add on the bucket's reference count, shared by every thread on that
    timer: with two threads on one timer, those adds (6 per cancel)
    bounced the bucket's cache line between the cores.
    """
    cdef PyObject *b = _list_of(entry)
    while b != <PyObject *>None:
        tw_lock(&(<TimerTaskList>b)._counter._mu)
        if <PyObject *>entry._list == b:
            return b
        tw_unlock(&(<TimerTaskList>b)._counter._mu)
        b = _list_of(entry)
    return NULL


cdef PyObject *_lock_task(TimerTask task) noexcept:
    """_lock_list for a task, waiting out a move by another thread.

    A pending or expired task whose ``_list`` reads None is between the
    unlink and the re-link of an add() running under its timer's lock in
    another thread: look again (bounded; that thread holds the lock for a
    few hundred instructions).
    """
    cdef PyObject *bucket
    cdef Py_ssize_t spins = 0
    cdef unsigned char state
    while True:
        bucket = _lock_list(task)
        if bucket is not NULL or spins >= 1_000_000:
            return bucket
        state = _state_of(task)
        if state != PENDING and state != EXPIRED:
            return bucket
        spins += 1


# Each class docstring (and __init__ docstring) opens with the constructor's
# signature and a "--" line: CPython serves that as __text_signature__
# (inspect.signature, help(), IDEs) and leaves it out of __doc__.
@cython.final
@cython.no_gc
cdef class TaskCounter:
    """TaskCounter()
--

    A count of tasks shared by every bucket of one timer (Kafka's taskCounter)."""

    def __repr__(self):
        return f"<TaskCounter value={self.value}>"


@cython.no_gc
cdef class TimerTaskEntry:
    """TimerTaskEntry(expiration_ms=0)
--

    A node of a TimerTaskList: an absolute expiration plus prev/next links."""

    def __init__(self, expiration_ms=0):
        """__init__($self, expiration_ms=0)
--

Initialize self.  See help(type(self)) for accurate signature."""
        self._expiration_ms = _check_time(expiration_ms, "expiration_ms")

    @property
    def expiration_ms(self):
        """Absolute expiration on the wheel's clock, in milliseconds."""
        return self._expiration_ms

    @expiration_ms.setter
    def expiration_ms(self, value):
        if self._next is not NULL:
            raise RuntimeError("cannot change expiration_ms of a linked entry")
        self._expiration_ms = _check_time(value, "expiration_ms")

    @property
    def list(self):
        """The bucket this entry is linked in, or None."""
        return self._list if self._next is not NULL else None

    @property
    def task(self):
        """The task this entry schedules: the entry itself for a TimerTask."""
        return self if isinstance(self, TimerTask) else None

    def __repr__(self):
        return f"<{type(self).__name__} expiration_ms={self._expiration_ms}>"


@cython.no_gc
cdef class TimerTask(TimerTaskEntry):
    """TimerTask(delay_ms, fn=None, /, *args, **kwargs)
--

    A task to run once after ``delay_ms`` milliseconds.

    Pass a callable (and its arguments), or subclass and override :meth:`run`.
    A task is its own node in the timer's bucket list, so a pending timer is
    one object.  When a callable-backed task has run or been cancelled, the
    callable and its arguments are released (breaking reference cycles such
    as ``obj._timeout = timer.schedule(5, obj.on_timeout)``), and adding it
    again raises; a subclass that overrides :meth:`run` can be re-added.

    Runtime complexity: O(1) to create and to cancel.

    >>> task = TimerTask(10, print, "hello")
    >>> task.delay_ms, task.pending, task.cancelled
    (10, False, False)

    :param delay_ms: delay in milliseconds (int or float); negative means due
    :param fn: callable to run, or None when a subclass overrides run()
    :raises TypeError: if ``fn`` is not callable or ``delay_ms`` not a number
    :raises ValueError: if ``delay_ms`` is NaN or infinite
    """

    def __init__(self, delay_ms, fn=None, /, *args, **kwargs):
        """__init__($self, delay_ms, fn=None, /, *args, **kwargs)
--

Initialize self.  See help(type(self)) for accurate signature."""
        _delay_to_ns(delay_ms, self)
        if fn is not None and not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        if kwargs:
            if fn is None:
                raise TypeError("keyword arguments need fn")
            fn = _partial(fn, *args, **kwargs)
            args = ()
        self._fn = fn
        self._args = args

    @property
    def delay_ms(self):
        """The delay, in milliseconds, applied each time the task is added."""
        if self._delay_is_int:
            return <long long>self._delay_ms
        return self._delay_ms

    @delay_ms.setter
    def delay_ms(self, value):
        _delay_to_ns(value, self)

    @property
    def deadline_ns(self):
        """The exact deadline on the timer's clock (ns) that the last add computed.

        ``expiration_ms`` is this rounded up to the tick; a driver that wants
        asyncio's order runs one tick's tasks sorted by it (the wheel keeps
        a bucket in the order its tasks were linked, as Kafka does).  It lies
        at most 2**32 - 1 ns (about 4.3 s) before ``expiration_ms``.

        A caller that knows the deadline better than the clock read of the
        add (asyncio's ``call_at(when)``) may set it, within that range; the
        task stays in its bucket.

        :raises ValueError: if set after ``expiration_ms`` or too far before
        """
        return self._expiration_ms * NS_PER_MS - self._early_ns

    @deadline_ns.setter
    def deadline_ns(self, value):
        cdef int64_t end = self._expiration_ms * NS_PER_MS
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise TypeError(f"deadline_ns must be an int, got {value!r}")
        v = _index(value)
        if not end - 0xFFFFFFFF <= v <= end:
            raise ValueError(
                f"deadline_ns must be in [{end - 0xFFFFFFFF}, {end}] "
                f"(expiration_ms {self._expiration_ms}), got {value!r}"
            )
        self._early_ns = <unsigned int>(end - <int64_t>v)

    @property
    def fn(self):
        """The callable run() calls, or None (subclass, or released after use)."""
        return self._fn

    @property
    def args(self):
        """Positional arguments for fn."""
        return self._args if self._args is not None else ()

    @property
    def cancelled(self):
        """True if cancel() stopped this task from running."""
        return _state_of(self) == CANCELLED

    @property
    def pending(self):
        """True while the task is added and has neither started nor been cancelled."""
        cdef unsigned char state = _state_of(self)
        return state == PENDING or state == EXPIRED

    @property
    def done(self):
        """True once run() has returned (or raised)."""
        return _state_of(self) == DONE

    @property
    def state(self):
        """One of idle, pending, expired, running, done, cancelled."""
        return _STATE_NAMES[_state_of(self)]

    def run(self):
        """Run the task: call ``fn(*args)``.  Subclasses override this."""
        fn = self._fn
        if fn is not None:
            fn(*self._args)

    # Replaced by a METH_NOARGS method descriptor at import (_cancel_noargs,
    # with this docstring): no CyFunction or argument-parsing adapter.
    @cython.binding(False)
    @cython.embedsignature(True)
    @cython.embedsignature.format("clinic")
    def cancel(self):
        """Stop the task from running.

        Runtime complexity: O(1) (unlinks the node from its bucket).

        >>> TimerTask(5, print).cancel()   # never added: nothing to cancel
        False

        :return: True iff the task was pending (or linked in a bucket by
            TimerTaskList.add) and now never runs
        """
        return _task_cancel(self)

    # METH_O, like cancel(): no CyFunction vectorcall adapter per call.
    @cython.binding(False)
    @cython.embedsignature(True)
    @cython.embedsignature.format("clinic")
    def postpone(self, delay_ms):
        """Move this pending task to run ``delay_ms`` from now (later or sooner).

        The same as ``task.delay_ms = delay_ms`` then ``timer.add(task)`` on
        the timer it is pending in, in one call: what a heartbeat or an idle
        timeout does on every message.  A task that was due but has not
        started yet is taken back.  If the timer refuses the new deadline,
        the task stays where it was.

        Runtime complexity: O(levels) (an O(1) unlink, then the add).

        >>> core = TimerCore(manual=True)
        >>> task = TimerTask(100, print, "late")
        >>> core.add(task)
        >>> task.postpone(250), task.expiration_ms, len(core)
        (True, 250, 1)
        >>> task.cancel(), task.postpone(10)
        (True, False)

        :param delay_ms: the new delay in milliseconds (int or float)
        :return: True if the task was pending and now runs ``delay_ms`` from
            now; False if it already started, ran or was cancelled (it is
            left alone: schedule a new task)
        :raises RuntimeError: if the task was never added to a timer, or its
            timer is gone or closed
        :raises TypeError: if ``delay_ms`` is not a number
        :raises ValueError: if ``delay_ms`` is NaN or infinite
        :raises OverflowError: if the deadline is out of the clock's range
        """
        cdef TimerTaskList bucket
        cdef TimerCore core
        cdef double old_delay
        cdef unsigned char old_is_int
        cdef int64_t delay_ns
        if TW_FT_LOCKS:
            return _postpone_locked(self, delay_ms)
        if self._state != PENDING and self._state != EXPIRED:
            if self._state == IDLE:
                raise RuntimeError(
                    f"{self!r} was never added to a timer; add it with timer.add(task)"
                )
            return False
        bucket = self._list
        cdef PyObject *owner = NULL
        if bucket is not None and bucket._counter._owner is not None:
            owner = tw_weakref_get(<PyObject *>bucket._counter._owner)
        if owner is NULL:
            raise RuntimeError(f"{self!r} is not pending in a live timer")
        core = <TimerCore>owner
        TW_DECREF(owner)  # `core` holds its own reference now
        old_delay = self._delay_ms
        old_is_int = self._delay_is_int
        delay_ns = _delay_to_ns(delay_ms, self)
        try:
            wake = core._add(self, delay_ns)
        except BaseException:
            self._delay_ms = old_delay
            self._delay_is_int = old_is_int
            raise
        if wake:
            core._on_wake()
        return True

    def __repr__(self):
        return (
            f"<{type(self).__name__} delay_ms={self.delay_ms!r} "
            f"state={_STATE_NAMES[_state_of(self)]} expiration_ms={self._expiration_ms}>"
        )


cdef object _cancel_locked(TimerTask self):
    # TimerTask.cancel on free-threaded builds: the GIL build's logic under
    # the lock of the timer the task is in (none if it is in no bucket).
    # ``b`` is borrowed (_lock_list): still valid after the task lets go of
    # it, for the unlock.  The callable and arguments are read only once the
    # task is ours to cancel: before that, the runner may be releasing them.
    cdef PyObject *b = _lock_task(self)
    cdef PyObject *fn = NULL
    cdef object args = None
    cdef object keep = None
    if b is not NULL and (<TimerTaskList>b)._counter._owner is None:
        # A bucket linked by hand (no timer keeps it alive): the unlink may
        # drop its last reference, and the unlock below still needs it.
        keep = <object>b
    # One read: with no bucket (no lock held) the state may change meanwhile.
    cdef unsigned char state = _state_of(self)
    if state == PENDING:
        if b is not NULL and self._next is not NULL:
            (<TimerTaskList>b)._unlink(self)
    elif state == EXPIRED:
        if b is not NULL:
            tw_atomic_add_ssize(&(<TimerTaskList>b)._counter.value, -1)
        _set_list(self, None)
    elif state == IDLE and b is not NULL and self._next is not NULL:
        (<TimerTaskList>b)._unlink(self)
    else:
        if b is not NULL:
            tw_unlock(&(<TimerTaskList>b)._counter._mu)
        return False
    tw_store_u8(&self._state, CANCELLED)
    if self._fn is not None:
        # _release, with the callable moved out rather than copied: a
        # callable shared by many tasks (and threads) gets one atomic
        # reference count change per cancel, not three.
        self._spent = True
        args = self._args
        self._args = ()
        TW_TASK_TAKE_FN(self, &fn)
    if b is not NULL:
        tw_unlock(&(<TimerTaskList>b)._counter._mu)
    # ``fn`` and ``args`` (the last references, maybe) go after the unlock.
    if fn is not NULL:
        TW_DECREF(fn)
    return True


cdef object _postpone_locked(TimerTask self, object delay_ms):
    # TimerTask.postpone on free-threaded builds: checks and the move under
    # the lock of the timer the task is in; _on_wake after unlocking.
    cdef TimerTaskList bucket
    cdef TimerCore core
    cdef double old_delay
    cdef unsigned char old_is_int, state
    cdef int64_t delay_ns = _delay_to_ns(delay_ms)  # validate before locking
    cdef PyObject *owner = NULL
    cdef PyObject *b = _lock_task(self)
    bucket = <TimerTaskList>b if b is not NULL else None
    try:
        state = _state_of(self)
        if state != PENDING and state != EXPIRED:
            if state == IDLE:
                raise RuntimeError(
                    f"{self!r} was never added to a timer; add it with timer.add(task)"
                )
            return False
        if bucket is not None and bucket._counter._owner is not None:
            owner = tw_weakref_get(<PyObject *>bucket._counter._owner)
        if owner is NULL:
            raise RuntimeError(f"{self!r} is not pending in a live timer")
        core = <TimerCore>owner
        TW_DECREF(owner)
        old_delay = self._delay_ms
        old_is_int = self._delay_is_int
        _delay_to_ns(delay_ms, self)
        try:
            wake = core._add(self, delay_ns)
        except BaseException:
            self._delay_ms = old_delay
            self._delay_is_int = old_is_int
            raise
    finally:
        if bucket is not None:
            tw_unlock(&bucket._counter._mu)
    if wake:
        core._on_wake()
    return True


cdef inline object _task_cancel(TimerTask self):
    # TimerTask.cancel's body.
    cdef PyObject *bucket
    if TW_FT_LOCKS:
        # Free-threaded: under the timer's lock (see _wheel.pxd); the
        # callable is released after unlocking (its __del__ may call us).
        return _cancel_locked(self)
    # Borrowed: the bucket is not touched after the task drops its
    # reference to it (_unlink; the counter is updated first below).
    bucket = <PyObject *>self._list
    if self._state == PENDING:
        if bucket != <PyObject *>None and self._next is not NULL:
            _unlink_entry(<TimerTaskList>bucket, self)
    elif self._state == EXPIRED:
        if bucket != <PyObject *>None:
            tw_atomic_add_ssize(&(<TimerTaskList>bucket)._counter.value, -1)
        _set_list(self, None)
    elif (self._state == IDLE and self._next is not NULL
          and bucket != <PyObject *>None):
        # Linked by hand with TimerTaskList.add (Kafka's TimerTaskListTest):
        # off the common path, which tests PENDING first.
        _unlink_entry(<TimerTaskList>bucket, self)
    else:
        return False
    tw_store_u8(&self._state, CANCELLED)
    _release(self)
    return True


@cython.final
@cython.no_gc
cdef class TimerTaskList:
    """TimerTaskList(counter=None)
--

    A bucket: a circular doubly-linked list of entries.

    Runtime complexity: O(1) add and remove; flush is O(n).

    :param counter: the TaskCounter shared by every bucket of one timer
    """

    def __cinit__(self, TaskCounter counter=None):
        self._tail = <PyObject *>self
        self._head = <PyObject *>self
        self._counter = counter if counter is not None else TaskCounter()

    # No __dealloc__: entries keep their bucket alive, so a bucket is freed
    # empty (or after its wheel cleared it), and the self-loop of an empty
    # ring is made of borrowed pointers, which keep nothing alive.

    @property
    def counter(self):
        """The TaskCounter this bucket adds to and subtracts from."""
        return self._counter

    @property
    def expiration_ms(self):
        """Start of the time slot this bucket holds, or None when not queued."""
        return self._expiration_ms if self._has_expiration else None

    def set_expiration(self, expiration_ms):
        """Set the slot time; return True iff it changed (queue the bucket then)."""
        cdef bint changed
        if expiration_ms is None:
            changed = self._has_expiration
            self._has_expiration = False
            return changed
        return self._set_expiration(_check_time(expiration_ms, "expiration_ms"))

    cdef bint _set_expiration(self, int64_t expiration_ms) noexcept:
        cdef bint changed = not self._has_expiration or self._expiration_ms != expiration_ms
        self._expiration_ms = expiration_ms
        self._has_expiration = True
        return changed

    def __len__(self):
        return self._size

    def add(self, entry):
        """Link ``entry`` at the tail, first unlinking it from any bucket it is in."""
        if not isinstance(entry, TimerTaskEntry):
            raise TypeError(f"entry must be a TimerTaskEntry, got {entry!r}")
        cdef TimerTaskEntry e = entry
        if e._next is not NULL and e._list is not None:
            e._list._unlink(e)
        self._link(e)

    def remove(self, TimerTaskEntry entry):
        """Unlink ``entry`` if it is in this bucket; return True iff it was."""
        if entry._list is self and entry._next is not NULL:
            self._unlink(entry)
            return True
        return False

    def flush(self, fn):
        """Unlink every entry, reset the expiration, then call ``fn(entry)`` on each.

        The entries are detached before the first call, so ``fn`` may add them
        back to this very bucket.

        :return: how many entries were flushed
        """
        cdef list entries = self.entries()
        for node in entries:
            self._unlink(<TimerTaskEntry>node)
        self._has_expiration = False
        for entry in entries:
            fn(entry)
        return len(entries)

    def entries(self):
        """The linked entries, head to tail."""
        cdef list out = []
        cdef PyObject *root = <PyObject *>self
        cdef PyObject *node = self._head
        while node != root:
            out.append(<object>node)
            node = (<TimerTaskEntry>node)._next
        return out

    cdef void _link(self, TimerTaskEntry entry) noexcept:
        _link_tail(self, entry)

    cdef void _unlink(self, TimerTaskEntry entry) noexcept:
        _unlink_entry(self, entry)

    cdef PyObject **_detach(self) except NULL:
        # Empty a bucket of DETACH_MIN or more entries in one go: return them
        # in list order, each with the ring's reference handed over (a
        # malloc'd array; the caller clears each entry's links, drops the
        # reference and frees the array).
        # The walk goes from both ends at once: two independent pointer
        # chases, so a bucket that is not in the cache waits for two memory
        # loads at a time instead of one (the 10^7-timer drains).
        cdef Py_ssize_t n = self._size
        cdef Py_ssize_t lo = 0, hi = n - 1
        cdef PyObject *h = self._head
        cdef PyObject *t = self._tail
        cdef PyObject **out = <PyObject **>malloc(n * sizeof(PyObject *))
        if out is NULL:
            raise MemoryError()
        while lo < hi:
            out[lo] = h
            out[hi] = t
            h = (<TimerTaskEntry>h)._next
            t = (<TimerTaskEntry>t)._prev
            lo += 1
            hi -= 1
        if lo == hi:
            out[lo] = h
        self._head = <PyObject *>self
        self._tail = <PyObject *>self
        self._size = 0
        tw_atomic_add_ssize(&self._counter.value, -n)
        return out

    cdef void _clear(self) noexcept:
        # Unlink every entry, dropping the ring's references.  One at a time,
        # so the ring is consistent whenever a freed task's finalizer runs
        # (and whatever it adds is cleared too).  The caller keeps the bucket
        # alive (its wheel's list of buckets).
        while self._head != <PyObject *>self:
            self._unlink(<TimerTaskEntry>self._head)
        self._has_expiration = False

    def _check(self):
        """Raise AssertionError unless the ring is consistent."""
        cdef PyObject *root = <PyObject *>self
        cdef PyObject *node = root
        cdef PyObject *nxt
        cdef Py_ssize_t count = 0
        while True:
            nxt = (<TimerTaskEntry>node)._next
            if nxt is NULL or (<TimerTaskEntry>nxt)._prev != node:
                raise AssertionError("broken prev/next links")
            if nxt == root:
                break
            if (<TimerTaskEntry>nxt)._list is not self:
                raise AssertionError(
                    f"{<object>nxt!r} is linked here but points elsewhere"
                )
            count += 1
            if count > self._size:
                raise AssertionError("more nodes than the recorded size")
            node = nxt
        if count != self._size:
            raise AssertionError(f"size {self._size} but {count} nodes")

    def __repr__(self):
        return f"<TimerTaskList size={self._size} expiration_ms={self.expiration_ms}>"


cdef inline bint _before(TimerTaskList a, TimerTaskList b) noexcept:
    return a._expiration_ms < b._expiration_ms or (
        a._expiration_ms == b._expiration_ms and a._seq < b._seq
    )


@cython.final
@cython.no_gc
cdef class DelayQueue:
    """DelayQueue()
--

    Buckets ordered by expiration: tells the driver when the next one is due.

    Runtime complexity: O(log b) offer and poll for b queued buckets (b is at
    most levels × wheel_size, about a hundred in practice).
    """

    def __cinit__(self):
        self._heap = []

    def __len__(self):
        return len(self._heap)

    def offer(self, TimerTaskList bucket):
        """Queue ``bucket`` at its expiration; return True iff it is the new head."""
        if not bucket._has_expiration:
            raise ValueError("bucket has no expiration_ms")
        return self._offer(bucket)

    cdef bint _offer(self, TimerTaskList bucket) except -1:
        cdef list heap = self._heap
        cdef Py_ssize_t pos = len(heap)
        cdef Py_ssize_t parent
        cdef TimerTaskList other
        self._seq += 1
        bucket._seq = self._seq
        heap.append(bucket)
        while pos > 0:
            parent = (pos - 1) >> 1
            other = <TimerTaskList>heap[parent]
            if not _before(bucket, other):
                break
            heap[pos] = other
            pos = parent
        heap[pos] = bucket
        return pos == 0

    cdef TimerTaskList _pop(self):
        cdef list heap = self._heap
        cdef TimerTaskList top = <TimerTaskList>heap[0]
        cdef TimerTaskList last = <TimerTaskList>heap.pop()
        cdef Py_ssize_t n = len(heap)
        cdef Py_ssize_t pos = 0
        cdef Py_ssize_t child
        if n == 0:
            return top
        while True:
            child = 2 * pos + 1
            if child >= n:
                break
            if child + 1 < n and _before(
                <TimerTaskList>heap[child + 1], <TimerTaskList>heap[child]
            ):
                child += 1
            if not _before(<TimerTaskList>heap[child], last):
                break
            heap[pos] = heap[child]
            pos = child
        heap[pos] = last
        return top

    def peek(self):
        """The bucket due first, or None."""
        return self._heap[0] if self._heap else None

    @property
    def next_expiration_ms(self):
        """Expiration of the bucket due first, or None when empty."""
        if self._heap:
            return (<TimerTaskList>self._heap[0])._expiration_ms
        return None

    def poll(self, now_ms):
        """Remove and return the head bucket if it is due at ``now_ms``, else None."""
        if self._heap and (<TimerTaskList>self._heap[0])._expiration_ms <= now_ms:
            return self._pop()
        return None

    def _check(self):
        """Raise AssertionError unless the heap is ordered and keys are current."""
        cdef list heap = self._heap
        cdef Py_ssize_t i, child
        for i in range(len(heap)):
            bucket = <TimerTaskList>heap[i]
            if not (<TimerTaskList>bucket)._has_expiration:
                raise AssertionError(f"{bucket!r} queued without an expiration")
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap) and _before(heap[child], bucket):
                    raise AssertionError("heap order violated")


@cython.final
@cython.no_gc
cdef class TimingWheel:
    """TimingWheel(tick_ms=1, wheel_size=20, start_ms=0, counter=None, queue=None)
--

    One level of Kafka's hierarchical timing wheel.

    ``wheel_size`` buckets of ``tick_ms`` each cover ``interval_ms``; a later
    deadline goes to the overflow wheel (created on first use), whose tick is
    this wheel's interval.  ``current_time_ms`` is always a multiple of
    ``tick_ms``.  Not thread-safe: a timer serialises access.

    Runtime complexity: add is O(levels); advance_clock is O(levels).

    >>> wheel = TimingWheel(tick_ms=10, wheel_size=5, start_ms=1000)
    >>> wheel.add(TimerTaskEntry(1005)), wheel.add(TimerTaskEntry(1010))
    (False, True)

    :param tick_ms: width of one bucket, >= 1
    :param wheel_size: number of buckets, >= 2
    :param start_ms: initial time, rounded down to a multiple of tick_ms
    :param counter: TaskCounter shared with overflow wheels (new if None)
    :param queue: DelayQueue shared with overflow wheels (new if None)
    :raises ValueError: if tick_ms < 1 or wheel_size < 2
    """

    def __init__(self, tick_ms=DEFAULT_TICK_MS, wheel_size=DEFAULT_WHEEL_SIZE,
                 start_ms=0, TaskCounter counter=None, DelayQueue queue=None):
        """__init__($self, tick_ms=1, wheel_size=20, start_ms=0, counter=None, queue=None)
--

Initialize self.  See help(type(self)) for accurate signature."""
        cdef int64_t tick = _check_positive(tick_ms, "tick_ms", 1)
        cdef int64_t size = _check_positive(wheel_size, "wheel_size", 2)
        cdef int64_t start = _check_time(start_ms, "start_ms")
        if <double>tick * <double>size > 4.611686018427388e18:
            raise OverflowError("tick_ms * wheel_size is too large")
        self._tick_ms = tick
        self._wheel_size = size
        self._interval_ms = tick * size
        self._tick_recip = tw_recip(<uint64_t>tick)
        self._counter = counter if counter is not None else TaskCounter()
        self._queue = queue if queue is not None else DelayQueue()
        self._buckets = [TimerTaskList(self._counter) for _ in range(size)]
        self._current_time_ms = _floordiv(start, tick) * tick
        self._current_index = _floordiv(start, tick) % size

    def __dealloc__(self):
        # Nodes reference their bucket, so without this the rings would
        # keep every bucket (and pending task) alive forever.
        if self._buckets is not None:
            for bucket in self._buckets:
                (<TimerTaskList>bucket)._clear()

    @property
    def tick_ms(self):
        """Width of one bucket."""
        return self._tick_ms

    @property
    def wheel_size(self):
        """Number of buckets."""
        return self._wheel_size

    @property
    def interval_ms(self):
        """tick_ms * wheel_size."""
        return self._interval_ms

    @property
    def current_time_ms(self):
        """The wheel's clock, a multiple of tick_ms."""
        return self._current_time_ms

    @property
    def overflow_wheel(self):
        """The next level up, or None until needed."""
        return self._overflow

    @property
    def counter(self):
        """The shared TaskCounter."""
        return self._counter

    @property
    def queue(self):
        """The shared DelayQueue of buckets."""
        return self._queue

    def bucket(self, Py_ssize_t index):
        """The bucket at ``index`` (0 <= index < wheel_size)."""
        return self._buckets[index]

    def add(self, entry):
        """Link ``entry`` into the bucket for its expiration.

        :return: False if the entry is already due (expiration before
            current_time_ms + tick_ms): the caller must run it instead.
        """
        if not isinstance(entry, TimerTaskEntry):
            raise TypeError(f"entry must be a TimerTaskEntry, got {entry!r}")
        if (<TimerTaskEntry>entry)._next is not NULL:
            raise ValueError(f"{entry!r} is already linked in a bucket")
        return self._add(<TimerTaskEntry>entry)

    @cython.cdivision(True)  # tick_ms >= 1
    cdef bint _add(self, TimerTaskEntry entry) except -1:
        return _wheel_link(self, entry, entry._expiration_ms) != 0

    def advance_clock(self, time_ms):
        """Move current_time_ms forward to ``time_ms`` rounded down to the tick."""
        self._advance(_check_time(time_ms, "time_ms"))

    cdef void _advance(self, int64_t time_ms) noexcept:
        cdef TimingWheel wheel = self
        cdef int64_t virtual_id
        while wheel is not None:
            if time_ms < wheel._current_time_ms + wheel._tick_ms:
                return
            virtual_id = _floordiv(time_ms, wheel._tick_ms)
            wheel._current_time_ms = virtual_id * wheel._tick_ms
            wheel._current_index = virtual_id % wheel._wheel_size
            time_ms = wheel._current_time_ms
            wheel = wheel._overflow

    def levels(self):
        """How many wheels (this one plus overflow wheels) exist."""
        cdef int n = 0
        cdef TimingWheel wheel = self
        while wheel is not None:
            n += 1
            wheel = wheel._overflow
        return n

    cdef Py_ssize_t _linked(self) noexcept:
        cdef Py_ssize_t total = 0
        cdef TimingWheel wheel = self
        while wheel is not None:
            for bucket in wheel._buckets:
                total += (<TimerTaskList>bucket)._size
            wheel = wheel._overflow
        return total

    def _check(self):
        """Raise AssertionError unless every level's buckets hold what they should."""
        cdef TimingWheel wheel = self
        cdef TimingWheel over
        cdef TimerTaskList bucket
        cdef int64_t tick, expiration, e
        queued = {id(b) for b in self._queue._heap}
        while wheel is not None:
            tick = wheel._tick_ms
            if wheel._current_time_ms % tick:
                raise AssertionError("current_time_ms not a multiple of tick_ms")
            if wheel._current_index != _floordiv(wheel._current_time_ms, tick) % wheel._wheel_size:
                raise AssertionError("current_index out of step with current_time_ms")
            if wheel._overflow is not None:
                over = wheel._overflow
                if over._tick_ms != wheel._interval_ms:
                    raise AssertionError("overflow tick must equal the child interval")
                if over._counter is not wheel._counter or over._queue is not wheel._queue:
                    raise AssertionError("overflow wheel must share counter and queue")
            for index in range(wheel._wheel_size):
                bucket = <TimerTaskList>wheel._buckets[index]
                bucket._check()
                if bucket._counter is not wheel._counter:
                    raise AssertionError("bucket counter differs from the wheel's")
                if not bucket._size:
                    continue
                if not bucket._has_expiration or id(bucket) not in queued:
                    raise AssertionError(f"non-empty bucket {index} is not queued")
                expiration = bucket._expiration_ms
                for entry in bucket.entries():
                    e = (<TimerTaskEntry>entry)._expiration_ms
                    if not expiration <= e < expiration + tick:
                        raise AssertionError(
                            f"{entry!r} in slot [{expiration}, {expiration + tick})"
                        )
                    if _floordiv(e, tick) % wheel._wheel_size != index:
                        raise AssertionError(f"{entry!r} in the wrong bucket")
            wheel = wheel._overflow
        self._queue._check()

    def __repr__(self):
        return (
            f"<TimingWheel tick_ms={self._tick_ms} wheel_size={self._wheel_size} "
            f"current_time_ms={self._current_time_ms} levels={self.levels()}>"
        )


# Expiring 10^7 timers is memory-bound: each node, and on free its pymalloc
# pool header, is a cache miss.  The run loop and poll's whole-bucket path
# know the nodes they will touch (a list, an array), so they ask for them a
# few entries ahead.  A prefetch never
# faults; where the compiler lacks the builtin it is a no-op.
cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define TW_PREFETCH(p) __builtin_prefetch((const void *)(p), 1, 3)
    #define TW_PREFETCH_PAGE(p) \
        __builtin_prefetch((const void *)((uintptr_t)(p) & ~(uintptr_t)4095), 1, 3)
    #else
    #define TW_PREFETCH(p) ((void)0)
    #define TW_PREFETCH_PAGE(p) ((void)0)
    #endif
    """
    void TW_PREFETCH(PyObject *p) noexcept nogil
    void TW_PREFETCH_PAGE(PyObject *p) noexcept nogil

cdef enum:
    RUN_PREFETCH_AHEAD = 8
    # poll() empties a bucket of at least this many entries with _detach
    # (two pointer chases at once, then prefetching ahead), smaller ones
    # entry by entry.
    DETACH_MIN = 64


cdef inline bint _drop_ready(list ready, TimerTask task) except -1:
    # A due task re-added before it ran leaves the ready list, so it is never
    # listed twice (a stale entry would run it ahead of tasks due before it
    # once it came due again).  Only tasks due when added are listed there.
    cdef Py_ssize_t i = PyList_GET_SIZE(ready)
    while i > 0:
        i -= 1
        if PyList_GET_ITEM(ready, i) == <PyObject *>task:
            del ready[i]
            return True
    return False


_EXPIRATION = operator.attrgetter("expiration_ms")


cdef inline unsigned int _early_of(int64_t expiration_ms, int64_t deadline_ns) noexcept:
    # TimerTask._early_ns: expiration_ms is deadline_ns rounded up, so this
    # is >= 0; a deadline far in the past (a negative delay) is clamped.
    # The LL suffix keeps the bound a C constant: a bare 0xFFFFFFFF is a
    # Python int to Cython, and the comparison then boxed ``early`` into a
    # new int object on every add (~100 instructions per schedule).
    cdef int64_t early = expiration_ms * NS_PER_MS - deadline_ns
    return <unsigned int>early if early < 0xFFFFFFFFLL else 0xFFFFFFFFU


@cython.cdivision(True)
cdef inline int64_t _ceil_ms(int64_t deadline_ns) noexcept nogil:
    # A deadline in ns rounded up to the millisecond (Python's -(-x // M));
    # no addition before the division, which could pass 2**63 at the end
    # of the clock range.
    cdef int64_t q
    if deadline_ns > 0:
        q = deadline_ns / NS_PER_MS
        return q + (deadline_ns - q * NS_PER_MS != 0)
    return -_floordiv(-deadline_ns, NS_PER_MS)


cdef inline int _wheel_link(TimingWheel wheel, TimerTaskEntry entry,
                            int64_t expiration) except -1:
    """Link ``entry`` (expiring at ``expiration``) into the level that holds it.

    0: it is due at the lowest level (nothing linked); 1: linked; 2: linked,
    and its bucket became the queue's head (the driver must wake).  The
    levels are walked through borrowed pointers: every level is owned by
    the one below it (the first by the timer), and nothing here can run
    Python code except allocating a new level (_grow).
    """
    cdef PyObject *w = <PyObject *>wheel
    cdef int64_t tick = wheel._tick_ms
    cdef int64_t current = wheel._current_time_ms
    cdef int64_t offset = expiration - current
    if offset < tick:
        return 0
    # A level's clock is the lowest level's rounded down to its own tick,
    # so its offset is at least this one: every level whose interval this
    # offset reaches is passed over on one comparison each.  The level
    # reached may still be one short (its own offset is larger by less
    # than its tick); the one above it then holds the entry, since a
    # level's interval is wheel_size >= 2 times the one below.
    while True:
        if offset < (<TimingWheel>w)._interval_ms:
            current = (<TimingWheel>w)._current_time_ms
            offset = expiration - current
            if offset < (<TimingWheel>w)._interval_ms:
                break
        if (<TimingWheel>w)._overflow is None:
            _grow(<TimingWheel>w)
        w = <PyObject *>(<TimingWheel>w)._overflow
    return _link_in_level(w, TW_LIST_ITEMS(<PyObject *>(<TimingWheel>w)._buckets),
                          current, offset, entry)


cdef inline int _link_in_level(PyObject *w, PyObject **buckets, int64_t current,
                               int64_t offset, TimerTaskEntry entry) except -1:
    # The end of _wheel_link and _level_link: link ``entry`` into level
    # ``w`` (its clock ``current``, its buckets' items ``buckets``) at
    # ``offset`` ms past that clock, 0 < offset < the level's interval;
    # 1 or 2 as _wheel_link.  Relative to the level's current slot, so no
    # 64-bit signed division and no modulo (bucket = (current slot +
    # slots) mod wheel_size).
    cdef int64_t tick = (<TimingWheel>w)._tick_ms
    cdef int64_t slots, index
    cdef PyObject *b
    if tick == 1:
        slots = offset
    elif offset <= <int64_t>UINT32_MAX:
        # A multiplication instead of a division (~15 cycles that the
        # link waits for): exact below 2**32 (_compat.h).
        slots = <int64_t>tw_div_by_recip(<uint64_t>offset, <uint64_t>tick,
                                         (<TimingWheel>w)._tick_recip)
    else:
        slots = <uint64_t>offset // <uint64_t>tick
    index = (<TimingWheel>w)._current_index + slots
    if index >= (<TimingWheel>w)._wheel_size:
        index -= (<TimingWheel>w)._wheel_size
    b = buckets[index]
    _link_tail(<TimerTaskList>b, entry)
    # The bucket is queued once per time slot: only when its expiration
    # changes does it need a (new) place in the queue.
    if (<TimerTaskList>b)._set_expiration(current + slots * tick):
        return 1 + (<TimingWheel>w)._queue._offer(<TimerTaskList>b)
    return 1


cdef void _levels_refresh(TimerCore core) noexcept:
    # _level_link's table: the levels there are now, up to TW_LEVELS.
    cdef PyObject *w = <PyObject *>core._wheel
    cdef int n = 0
    while w != <PyObject *>None and n < TW_LEVELS:
        core._levels[n] = w
        core._level_buckets[n] = TW_LIST_ITEMS(<PyObject *>(<TimingWheel>w)._buckets)
        n += 1
        w = <PyObject *>(<TimingWheel>w)._overflow
    core._nlevels = n


def _level_table(TimerCore core):
    """(for tests) How many levels ``core.schedule()``'s table holds."""
    return core._nlevels


cdef inline int _level_link(TimerCore core, TimerTaskEntry entry,
                            int64_t expiration) except -1:
    """_wheel_link for schedule(), from the timer's table of levels.

    Same level, bucket and return values as _wheel_link, or 3: not linked,
    because the entry is due at the lowest level or lies beyond the levels
    in the table (the caller then uses _wheel_link and refreshes the
    table).  _wheel_link finds the level by walking up the chain, a
    dependent load and a comparison the CPU mispredicts whenever the level
    changes from one call to the next; here every level's comparison is
    independent of the others and their sum is the level: the first one
    whose interval holds the entry (the test only ever turns true going up:
    see _wheel_link).  W2 on 3.14 and 3.15: 1-3 % less time, tickwheel ÷
    floor-handle 1.186 -> 1.155 and 1.164 -> 1.148 (bench/README.md).
    """
    cdef int n = core._nlevels
    cdef int k = 0
    cdef int i
    cdef PyObject *w
    cdef int64_t current, offset
    for i in range(n):
        w = core._levels[i]
        k += (expiration - (<TimingWheel>w)._current_time_ms
              >= (<TimingWheel>w)._interval_ms)
    if k >= n:
        return 3
    w = core._levels[k]
    current = (<TimingWheel>w)._current_time_ms
    offset = expiration - current
    # (Due at once only at the lowest level: the others' offsets are larger.)
    if offset < (<TimingWheel>w)._tick_ms:
        return 3
    return _link_in_level(w, core._level_buckets[k], current, offset, entry)


cdef int _grow(TimingWheel w) except -1:
    # The overflow level above ``w``, made on first use.
    cdef TimingWheel overflow = TimingWheel(
        w._interval_ms, w._wheel_size, w._current_time_ms, w._counter, w._queue,
    )
    # Allocation may run a GC pass and user finalizers (3.11); one of them
    # could have created the level already.
    if w._overflow is None:
        w._overflow = overflow
    return 0


def _in_expiration_order(list tasks, Py_ssize_t n_ready):
    """The ready tasks (the first ``n_ready``) merged into the polled ones.

    By expiration; on a tie the polled task goes first, because it was added
    earlier: it was not yet due when added, the ready one already was.
    """
    cdef list merged = tasks[n_ready:] + tasks[:n_ready]
    merged.sort(key=_EXPIRATION)
    return merged


# -- lanes (TimerCore._use_lanes; the lock protocol: _wheel.pxd, "Lanes") -----

cdef inline TimerCore _thread_lane(TimerCore self):
    # The lane this thread's new tasks go to: ``self`` unless laned.
    if self._lanes is None:
        return self
    cdef Py_ssize_t k = tw_thread_lane() % self._nlanes
    if k == 0:
        return self
    return <TimerCore>self._lanes[k]


cdef Py_ssize_t _lane_index(TimerCore self, TaskCounter counter) noexcept:
    # Which lane of this timer counts with ``counter`` (0 unless laned), or -1.
    cdef Py_ssize_t i
    if counter is self._counter:
        return 0
    for i in range(1, self._nlanes):
        if (<TimerCore>self._lanes[i])._counter is counter:
            return i
    return -1


cdef TimerCore _lane_holding(TimerCore self, TaskCounter counter):
    # The lane of this timer whose count is ``counter``, or None.
    cdef Py_ssize_t i = _lane_index(self, counter)
    if i < 0:
        return None
    return self if i == 0 else <TimerCore>self._lanes[i]


cdef list _cores(TimerCore self):
    # Every lane, lane 0 (``self``) first; just ``[self]`` unless laned.
    cdef list cores = [self]
    if self._lanes is not None:
        cores.extend(self._lanes[1:])
    return cores


cdef object _add_guarded(TimerCore self, TimerTask task, int64_t delay_ns):
    # add() on a free-threaded build, or on a laned timer.  A task in a
    # bucket is moved under the lock of that bucket's timer (or lane), taken
    # through the bucket as cancel() takes it: a task pending in another
    # timer is refused there, never read while that timer moves it.  A task
    # in no bucket goes to this thread's lane (this timer, unless laned),
    # placed while holding its claim (_wheel.pxd, "Lanes"), so that two
    # threads adding one task, to one timer or two, take turns.
    cdef TimerCore core
    cdef PyObject *b
    cdef unsigned char state
    cdef bint claimed
    while True:
        claimed = False
        b = _lock_task(task)
        if b is not NULL:
            core = _lane_holding(self, (<TimerTaskList>b)._counter)
            if core is not None:
                try:  # ours: moved within its lane, whose lock is held
                    wake = core._add(task, delay_ns)
                finally:
                    tw_unlock(&core._counter._mu)
                break
            state = _state_of(task)
            tw_unlock(&(<TimerTaskList>b)._counter._mu)
            if state == PENDING or state == EXPIRED:
                raise ValueError(f"{task!r} is pending in another timer")
            # Linked by hand in a bucket no timer owns (TimerTaskList.add).
            core = _thread_lane(self)
            tw_lock(&core._counter._mu)
        else:
            if not tw_cas_u8(&task._claim, 0, 1):
                tw_cpu_pause()  # another thread is placing it
                continue
            claimed = True
            core = _thread_lane(self)
            tw_lock(&core._counter._mu)
            if _list_of(task) != <PyObject *>None:
                # Placed by a claim released just before ours: look again.
                tw_unlock(&core._counter._mu)
                tw_store_u8(&task._claim, 0)
                continue
        try:
            wake = core._add(task, delay_ns)
        finally:
            tw_unlock(&core._counter._mu)
            if claimed:
                tw_store_u8(&task._claim, 0)
        break
    if wake:
        self._on_wake()


cdef int _timer_add(TimerCore self, TimerTask t) except -1:
    # TimerCore.add's body after the type check; the compiled purgatory
    # calls it directly for a timer whose class keeps TimerCore's add.
    cdef int64_t delay_ns
    if t._delay_is_int:
        delay_ns = (<int64_t>t._delay_ms) * NS_PER_MS
    else:
        delay_ns = <int64_t>ceil(t._delay_ms * <double>NS_PER_MS)
    if TW_FT_LOCKS or self._lanes is not None:
        _add_guarded(self, t, delay_ns)
    elif self._add(t, delay_ns):
        self._on_wake()
    return 0


cdef Py_ssize_t _timer_len(TimerCore self) noexcept:
    # len(timer) (TimerCore.__len__), for the compiled purgatory.
    cdef Py_ssize_t total, i
    total = tw_atomic_load_ssize(&self._counter.value)
    if self._lanes is not None:
        for i in range(1, self._nlanes):
            total += tw_atomic_load_ssize(&(<TimerCore>self._lanes[i])._counter.value)
    return total


cdef object _cancel_task(TimerTask task):
    # TimerTask.cancel(), for the compiled purgatory (no attribute lookup).
    return _task_cancel(task)


@cython.final
cdef class _Lane(TimerCore):
    """One lane of a laned timer (TimerCore._use_lanes): a core of its own
    whose wake-ups go to that timer."""

    cdef object _root_ref  # weakref.ref to the laned timer

    def _on_wake(self):
        root = self._root_ref()
        if root is not None:
            root._on_wake()



cdef class TimerCore:
    """TimerCore(tick_ms=1, wheel_size=20, start_ms=None, clock=None, manual=False)
--

    The fast part of a timer: wheel, bucket queue, clock, add/cancel/expire.

    SystemTimer and MockTimer subclass it.  Deadlines are computed from the
    clock in nanoseconds and rounded *up* to the tick, so a task is never
    considered due before its deadline (Kafka truncates "now" to the
    millisecond and can fire up to a tick early).

    :param tick_ms: wheel resolution in milliseconds, >= 1
    :param wheel_size: buckets per level, >= 2
    :param start_ms: wheel start (default: now)
    :param clock: a callable returning nanoseconds (default time.monotonic_ns)
    :param manual: drive the clock by hand via now_ns (MockTimer)
    """

    def __init__(self, tick_ms=DEFAULT_TICK_MS, wheel_size=DEFAULT_WHEEL_SIZE,
                 start_ms=None, clock=None, manual=False):
        """__init__($self, tick_ms=1, wheel_size=20, start_ms=None, clock=None, manual=False)
--

Initialize self.  See help(type(self)) for accurate signature."""
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be callable, got {clock!r}")
        self._clock = clock if clock is not None else _monotonic_ns
        self._fast_clock = self._clock is _monotonic_ns
        self._manual = bool(manual)
        cdef int64_t tick = _check_positive(tick_ms, "tick_ms", 1)
        _check_positive(wheel_size, "wheel_size", 2)
        _check_reach(tick, wheel_size)
        if start_ms is None:
            start_ms = 0 if manual else self._now_ns() // NS_PER_MS
        cdef int64_t start = _check_time(start_ms, "start_ms")
        tw_store_i64(&self._manual_now_ns, start * NS_PER_MS)
        self._counter = TaskCounter()
        self._counter._owner = _weakref(self)
        self._queue = DelayQueue()
        self._wheel = TimingWheel(tick, wheel_size, start, self._counter, self._queue)
        self._nlevels = 0  # (_level_link's table: filled on first use)
        self._tick_ms = tick
        # Expired tasks point at this (never linked) bucket so that running or
        # cancelling them can still find the counter.
        self._expired = TimerTaskList(self._counter)
        self._ready = []
        self._closed = False
        self._pc_horizon = -1
        self._nlanes = 1
        self._ms_ceil_ns = INT64_MIN
        self._ms_clock = (not TW_FT_LOCKS and TW_HAVE_C_CLOCK and self._fast_clock
                          and not self._manual and tick == 1)

    @cython.final
    cdef int64_t _now_ns(self) except? -1:
        if self._manual:
            return tw_load_i64(&self._manual_now_ns)
        if TW_HAVE_C_CLOCK and self._fast_clock:
            return tw_monotonic_ns()
        return self._clock()

    @property
    def now_ns(self):
        """The timer's clock in nanoseconds."""
        return self._now_ns()

    @now_ns.setter
    def now_ns(self, value):
        if not self._manual:
            raise AttributeError("now_ns is read-only on a real-time timer")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"now_ns must be an int, got {value!r}")
        if not -(2**62) <= value <= 2**62:
            raise OverflowError(f"now_ns={value!r} is out of range")
        if TW_FT_LOCKS:
            # The runner moves the manual clock under the timer's lock.
            tw_lock(&self._counter._mu)
            tw_store_i64(&self._manual_now_ns, value)
            tw_unlock(&self._counter._mu)
            return
        tw_store_i64(&self._manual_now_ns, value)

    @property
    def now_ms(self):
        """The timer's clock in whole milliseconds (rounded down)."""
        return _floordiv(self._now_ns(), NS_PER_MS)

    @property
    def tick_ms(self):
        """Width of a level-0 bucket, in milliseconds."""
        return self._tick_ms

    @property
    def wheel(self):
        """The level-0 TimingWheel."""
        return self._wheel

    @property
    def closed(self):
        """True after close()."""
        return self._closed

    def _use_lanes(self, n):
        """Split this timer into ``n`` lanes, so threads adding to it share no lock.

        Each lane is a wheel, bucket queue, count and lock of its own.  A
        thread's ``schedule``/``schedule_as`` go to its lane (threads are
        numbered as they first add, lane = number % n), so threads that
        schedule and cancel on one timer touch neither the same lock nor
        the same cache lines.  ``add(task)`` moves a pending task within its
        lane and puts any other in the calling thread's lane (two threads
        adding one task take turns).  A task stays in its lane until
        it runs or is cancelled; polling and the queries (``len``,
        ``next_expiration_ms``, ``cancel_all``, ...) visit every lane, and
        polled tasks come out merged in expiration order (to the tick).
        SystemTimer does this on free-threaded builds
        (docs/freethreading.md); for a new timer with a real-time clock.

        :param n: the number of lanes, >= 1 (1: no lanes)
        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n`` < 1, the timer has a manual clock, or
            it already has lanes or tasks
        """
        cdef Py_ssize_t k = <Py_ssize_t>_check_positive(n, "n", 1)
        cdef _Lane lane
        if self._manual:
            raise ValueError("a timer with a manual clock has one lane")
        if self._lanes is not None or tw_atomic_load_ssize(&self._counter.value):
            raise ValueError("lanes are for a new timer (no lanes, no tasks yet)")
        if k == 1:
            return
        root = _weakref(self)
        lanes = [None]
        for _ in range(1, k):
            lane = _Lane(self._tick_ms, self._wheel._wheel_size,
                         self._wheel._current_time_ms,
                         None if self._fast_clock else self._clock)
            lane._root_ref = root
            lane._closed = self._closed
            lanes.append(lane)
        self._nlanes = k
        self._lanes = tuple(lanes)

    @property
    def _lane_count(self):
        """How many lanes the timer has (1 unless split by _use_lanes)."""
        return self._nlanes

    def _lane_of(self, task):
        """The lane ``task`` is pending or expired in (0 unless laned), or None."""
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a TimerTask, got {task!r}")
        cdef PyObject *b = _list_of(<TimerTask>task)
        if b == <PyObject *>None:
            return None
        cdef Py_ssize_t i = _lane_index(self, (<TimerTaskList>b)._counter)
        return i if i >= 0 else None

    def __len__(self):
        # No lock: the count changes only under the timer's lock, by atomic
        # adds, so an atomic read sees a value it had (Kafka's timer.size
        # reads its AtomicInteger the same way).  The purgatory reads it on
        # every watch.  A laned timer sums its lanes' counts.
        return _timer_len(self)

    @property
    def next_expiration_ms(self):
        """When the next bucket is due (ms); now_ms if tasks are ready; None if idle."""
        cdef list heap
        cdef bint ready
        cdef TimerCore core
        if self._lanes is not None:
            ready = False
            best = None
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                if core._ready:
                    ready = True
                heap = core._queue._heap
                head = (<TimerTaskList>heap[0])._expiration_ms if heap else None
                tw_unlock(&core._counter._mu)
                if head is not None and (best is None or head < best):
                    best = head
            return self.now_ms if ready else best
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            ready = len(self._ready) > 0
            heap = self._queue._heap
            head = (<TimerTaskList>heap[0])._expiration_ms if heap else None
            tw_unlock(&self._counter._mu)
            return self.now_ms if ready else head
        if self._ready:
            return self.now_ms
        return self._queue.next_expiration_ms

    def add(self, task):
        """Schedule ``task`` to run ``task.delay_ms`` from now.

        Re-adding a pending task moves it (the count is unchanged).

        Runtime complexity: O(levels).

        :raises TypeError: if ``task`` is not a TimerTask
        :raises RuntimeError: if the timer is closed, or the task is spent
        :raises ValueError: if the task is pending in another timer
        """
        if not isinstance(task, TimerTask):
            raise TypeError(f"task must be a TimerTask, got {task!r}")
        _timer_add(self, <TimerTask>task)

    def schedule(self, delay_ms, fn, /, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` in ``delay_ms`` milliseconds.

        Runtime complexity: O(levels).

        :return: the TimerTask, whose cancel() stops it
        :raises TypeError: if ``fn`` is not callable
        :raises RuntimeError: if the timer is closed
        """
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        return _thread_lane(self)._schedule(delay_ms, fn, args, kwargs)

    def schedule_as(self, task_type, delay_ms, fn, /, *args):
        """Like schedule(), but the task is a new instance of ``task_type``.

        For TimerTask subclasses that add behaviour or slots (e.g. asyncio
        handles): the instance is made without calling ``__init__`` (its
        fields are set as ``TimerTask.__init__`` would) and added in the
        same call.

        Runtime complexity: O(levels).

        :return: the new ``task_type`` instance, already added
        :raises TypeError: if ``task_type`` is not a TimerTask subclass or
            ``fn`` is not callable
        """
        if not (isinstance(task_type, type) and issubclass(task_type, TimerTask)):
            raise TypeError(f"task_type must be a TimerTask subclass, got {task_type!r}")
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {fn!r}")
        return _thread_lane(self)._schedule_as(task_type, delay_ms, fn, args)

    def _loop_call_later(self, delay, callback, *args, context=None):
        """An event loop's ``call_later`` on this wheel (tickwheel's asyncio loop).

        ``delay`` in seconds; the handle is a new instance of the types given
        to :func:`_use_loop_handles`, with the current context (shared
        through ``self._share``) if it holds variables.  Anything else (a
        ``context``, a refused argument, no handle types) goes to
        ``self.call_later``, which checks and raises with the argument's
        name.  The loop installs this bound method as its own ``call_later``
        while no check is due (compiled: one C call, no Python frame).

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """
        return _loop_call_later_py(self, delay, callback, args, context)

    def _loop_call_at(self, when, callback, *args, context=None):
        """An event loop's ``call_at`` on this wheel (tickwheel's asyncio loop).

        ``when`` in seconds on the wheel's clock; the handle keeps ``when``
        as its exact deadline.  Like :meth:`_loop_call_later` otherwise:
        anything unusual goes to ``self.call_at``.

        Runtime complexity: O(levels).

        :return: the new handle, already added
        """
        if context is None:
            return self.call_at(when, callback, *args)
        return self.call_at(when, callback, *args, context=context)

    @cython.final
    cdef TimerTask _schedule_as(self, object task_type, object delay_ms, object fn,
                                tuple args):
        cdef TimerTask task
        cdef int64_t delay_ns
        if task_type is TimerTask:
            task = _new_task(fn, args)  # schedule()'s path
        elif tw_keeps_task_new(task_type, TimerTask):
            # No __init__, no **kwargs dict, no Python frame, no tp_new adapter.
            task = <TimerTask>tw_new_instance(task_type)
            task._fn = fn
            task._args = args
        else:
            # A subtype with its own __new__, which may have done anything:
            # the full checks of _add.
            task = <TimerTask>tw_new_instance(task_type)
            delay_ns = _delay_to_ns(delay_ms, task)
            task._fn = fn
            task._args = args
            if TW_FT_LOCKS:
                tw_lock(&self._counter._mu)
                try:
                    wake = self._add(task, delay_ns)
                finally:
                    tw_unlock(&self._counter._mu)
                if wake:
                    self._on_wake()
                return task
            if self._add(task, delay_ns):
                self._on_wake()
            return task
        return self._link_new(task, delay_ms)

    @cython.final
    cdef TimerTask _schedule_new(self, object delay_ms, object fn):
        # schedule(delay_ms, fn), the common call: _schedule_as's TimerTask
        # path with no extra arguments, no task type or argument tuple to
        # pass along (~50 instructions per schedule).
        return self._link_new(_new_task(fn, ()), delay_ms)

    @cython.final
    cdef TimerTask _link_new(self, TimerTask task, object delay_ms):
        # A task made here is idle and holds its callable: _add's checks for
        # a re-added task are skipped.
        cdef int64_t delay_ns = _delay_to_ns(delay_ms, task)
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                wake = self._add_new(task, delay_ns)
            finally:
                tw_unlock(&self._counter._mu)
            if wake:
                self._on_wake()
            return task
        if self._add_new(task, delay_ns):
            self._on_wake()
        return task

    @cython.final
    cdef TimerTask _schedule(self, object delay_ms, object fn, tuple args, dict kwargs):
        if kwargs:
            fn = _partial(fn, *args, **kwargs)
            args = ()
        return self._schedule_as(TimerTask, delay_ms, fn, args)

    @cython.final
    cdef int _add(self, TimerTask task, int64_t delay_ns) except -1:
        # Returns 1 when the driver must wake: the task is ready, or its
        # bucket became the queue's head.
        cdef TimerTaskList owner
        if self._closed:
            raise RuntimeError("timer is closed")
        if task._spent:
            raise RuntimeError(
                f"{task!r} has run or been cancelled and released its callable; "
                "schedule a new task"
            )
        cdef int64_t now_ns = self._now_ns()
        # Refused before anything moves (a re-added task stays put).
        cdef int64_t expiration = self._expiration_for(task, now_ns, delay_ns)
        if task._state == PENDING or task._state == EXPIRED:
            owner = task._list
            if owner is not None and owner._counter is not self._counter:
                raise ValueError(f"{task!r} is pending in another timer")
            if task._state == PENDING:
                if owner is not None and task._next is not NULL:
                    owner._unlink(task)
            else:
                tw_atomic_add_ssize(&self._counter.value, -1)
                _set_list(task, None)
                _drop_ready(self._ready, task)
        task._early_ns = _early_of(expiration, now_ns + delay_ns)
        return self._place(task, now_ns, expiration)

    @cython.final
    cdef int _add_new(self, TimerTask task, int64_t delay_ns) except -1:
        # _add for a task that was just made: idle, and holding its callable.
        if self._closed:
            raise RuntimeError("timer is closed")
        cdef int64_t now_ns = self._now_ns()
        cdef int64_t expiration = self._expiration_for(task, now_ns, delay_ns)
        task._early_ns = _early_of(expiration, now_ns + delay_ns)
        return self._place(task, now_ns, expiration)

    @cython.final
    cdef int _add_at(self, TimerTask task, int64_t now_ns, int64_t deadline_ns) except -1:
        # _add_new for an absolute deadline on the clock read ``now_ns``: the
        # task keeps that exact deadline (asyncio's call_at(when)).
        if self._closed:
            raise RuntimeError("timer is closed")
        cdef int64_t expiration = self._expiration_for(task, now_ns, deadline_ns - now_ns)
        task._early_ns = _early_of(expiration, deadline_ns)
        return self._place(task, now_ns, expiration)

    @cython.final
    cdef inline int64_t _ceil_now_ms(self, int64_t now_ns) noexcept:
        # _ceil_ms(now_ns) for a reading of the C clock, which never goes
        # back: the cached millisecond while the clock is still in it, so
        # that what is computed from it does not wait for the reading (see
        # _schedule_small).  GIL builds only (two fields, no lock).
        if now_ns > self._ms_ceil_ns:
            self._ms_ceil = _ceil_ms(now_ns)
            self._ms_ceil_ns = self._ms_ceil * NS_PER_MS
        return self._ms_ceil

    @cython.final
    @cython.cdivision(True)
    cdef int64_t _expiration_for(self, TimerTask task, int64_t now_ns,
                                 int64_t delay_ns) except? -1:
        # The deadline rounded up to the millisecond, then up to the tick:
        # never early.  For a whole number of ms on the C clock that is the
        # clock's millisecond (rounded up) plus the delay.
        cdef int64_t expiration
        if self._ms_clock and delay_ns > 0 and delay_ns % NS_PER_MS == 0:
            expiration = self._ceil_now_ms(now_ns) + delay_ns / NS_PER_MS
        else:
            expiration = _ceil_ms(now_ns + delay_ns)
            if self._tick_ms != 1:
                expiration = _ceil_to(expiration, self._tick_ms)
        if expiration > C_MAX_EXPIRATION_MS:
            _past_clock_end(task.delay_ms, _floordiv(now_ns, NS_PER_MS))
        return expiration

    @cython.final
    cdef int _place(self, TimerTask task, int64_t now_ns, int64_t expiration) except -1:
        # Link an unlinked task into the wheel, or make it ready if due.
        cdef int placed
        task._expiration_ms = expiration
        tw_store_u8(&task._state, PENDING)
        # "Due" is judged on the timer's clock: the wheel's own clock only
        # moves when a bucket is polled and may lag behind it.
        if expiration * NS_PER_MS > now_ns:
            placed = _wheel_link(self._wheel, task, expiration)
            if placed:
                return placed == 2
        self._expire(task)
        self._ready.append(task)
        return 1

    @cython.final
    cdef void _expire(self, TimerTask task) noexcept:
        tw_store_u8(&task._state, EXPIRED)
        _set_list(task, self._expired)
        tw_atomic_add_ssize(&self._counter.value, 1)

    def _on_wake(self):
        """Hook: a task became ready or an earlier bucket was queued."""

    def _take_ready(self):
        """Remove and return tasks that were already due when added."""
        cdef list fresh = []
        cdef list ready
        cdef TimerCore core
        cdef list keys
        if self._lanes is not None:
            ready = []
            keys = []  # expirations read under each lane's lock (_take_due_laned)
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                ready.extend(core._ready)
                keys.extend([(<TimerTask>t)._expiration_ms for t in core._ready])
                core._ready = []
                tw_unlock(&core._counter._mu)
            if len(ready) > 1:
                ready = [ready[i] for i in sorted(range(len(ready)), key=keys.__getitem__)]
            return ready
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
        ready = self._ready
        self._ready = fresh
        if TW_FT_LOCKS:
            tw_unlock(&self._counter._mu)
        return ready

    def _take_due(self, now_ms, bint step=False):
        """Advance through every bucket due at ``now_ms``; return the expired tasks.

        Tasks come out in expiration order (to the tick).  With ``step=True``
        it stops after the first time slot that expired at least one task,
        so a discrete-event driver can run them before looking further.
        """
        cdef int64_t limit = now_ms
        if self._lanes is not None:
            return _take_due_laned(self, limit, step)
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._poll(limit, step)
            finally:
                tw_unlock(&self._counter._mu)
        return self._poll(limit, step)

    cdef list _poll(self, int64_t limit, bint step):
        cdef list fresh = []
        cdef list expired = self._ready
        cdef list heap = self._queue._heap
        cdef TimingWheel wheel = self._wheel
        cdef TimerTaskList bucket
        cdef TimerTaskEntry node
        cdef int64_t head, last = 0
        cdef bint have_last = False
        cdef Py_ssize_t n, i
        cdef PyObject **nodes
        cdef Py_ssize_t n_ready = len(expired)
        self._ready = fresh
        while heap:
            head = (<TimerTaskList>heap[0])._expiration_ms
            if head > limit:
                break
            if step and have_last and head > last and len(expired):
                break
            bucket = self._queue._pop()
            last = head
            have_last = True
            wheel._advance(head)
            n = bucket._size
            if n < DETACH_MIN:
                while bucket._head != <PyObject *>bucket:
                    node = <TimerTaskEntry>bucket._head
                    bucket._unlink(node)  # `node` keeps it alive
                    if not wheel._add(node):
                        self._expire(<TimerTask>node)
                        expired.append(node)
            else:
                nodes = bucket._detach()
                i = 0
                try:
                    while i < n:
                        if i + RUN_PREFETCH_AHEAD < n:
                            TW_PREFETCH(nodes[i + RUN_PREFETCH_AHEAD])
                        node = <TimerTaskEntry>nodes[i]
                        node._prev = NULL
                        node._next = NULL
                        _set_list(node, None)
                        if not wheel._add(node):
                            self._expire(<TimerTask>node)
                            expired.append(node)
                        nodes[i] = NULL
                        Py_DECREF(node)  # the ring's reference, from _detach
                        i += 1
                except BaseException:
                    # Only a MemoryError from _add (a new wheel level): put
                    # the entries not handled back in the bucket, due again
                    # at the next poll, and keep the expired ones ready.
                    while i < n:
                        node = <TimerTaskEntry>nodes[i]
                        node._prev = NULL
                        node._next = NULL
                        _set_list(node, None)
                        bucket._link(node)
                        nodes[i] = NULL
                        Py_DECREF(node)
                        i += 1
                    self._queue._offer(bucket)
                    expired.extend(self._ready)
                    self._ready = expired
                    raise
                finally:
                    free(nodes)
            bucket._has_expiration = False
        if n_ready and len(expired) > n_ready:
            return _in_expiration_order(expired, n_ready)
        return expired

    @property
    def next_precascade_ms(self):
        """When precascade() may next find work (ms, after now), or None.

        The earliest time later than now at which an overflow bucket's slot
        overlaps the lower level's reach by half (it becomes eligible), or
        the bucket being moved down may be passed over again.  A driver that
        sleeps until the next due bucket should also wake by then, or the
        work waits for the bucket's slot to start (SystemTimer's reaper does).

        Runtime complexity: O(levels x wheel_size).
        """
        cdef TimerCore core
        if self._lanes is not None:
            best = None
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                try:
                    at = core._next_precascade()
                finally:
                    tw_unlock(&core._counter._mu)
                if at is not None and (best is None or at < best):
                    best = at
            return best
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._next_precascade()
            finally:
                tw_unlock(&self._counter._mu)
        return self._next_precascade()

    cdef object _next_precascade(self):
        cdef int64_t now_ms = _floordiv(self._now_ns(), NS_PER_MS)
        cdef TimingWheel lower = self._wheel
        cdef TimingWheel wheel = lower._overflow
        cdef TimerTaskList bucket
        cdef int64_t span, need, at, best = 0
        cdef bint found = False
        while wheel is not None:
            span = wheel._tick_ms
            for obj in wheel._buckets:
                bucket = <TimerTaskList>obj
                if not (bucket._size and bucket._has_expiration):
                    continue
                # precascade's test: 2 * (horizon - expiration) >= span.
                need = bucket._expiration_ms + (span + 1) // 2
                if (bucket is self._pc_bucket
                        and bucket._expiration_ms == self._pc_expiration
                        and self._pc_left <= 0 and self._pc_horizon >= 0):
                    need = max(need, self._pc_horizon + (span // 8 if span >= 8 else 1))
                # The lower level's horizon at t: t to its tick, plus its reach.
                at = _ceil_to(need - lower._interval_ms, lower._tick_ms)
                if at > now_ms and (not found or at < best):
                    best = at
                    found = True
            lower = wheel
            wheel = wheel._overflow
        return best if found else None

    def precascade(self, max_entries=PRECASCADE_CHUNK):
        """Move tasks of the next overflow bucket down a level before it is due.

        Kafka cascades an overflow bucket when its slot starts, all at once:
        a bucket holding 100,000 tasks stalls the driver for milliseconds
        just when its first tasks fall due.  A driver with idle time calls
        this instead, repeatedly, until it returns 0.  Each call looks at up
        to ``max_entries`` tasks of the overflow bucket due soonest among
        those whose slot already overlaps the lower level's reach by at least
        half: a task the lower level can hold moves there now, the others
        go back to their bucket.  One pass visits each task once; a bucket
        is passed over again only after the lower level's reach grew by an
        eighth of the bucket's span, so the work stays bounded.

        Deadlines, order and counts are unchanged: a task only ever moves to
        the bucket it would have reached at its slot's start.  When nothing
        is due, the wheel's clock is first brought up to the timer's.

        Runtime complexity: O(max_entries + levels x wheel_size).

        :param max_entries: the most tasks to look at in this call, >= 1
        :return: how many tasks it looked at (0: nothing to do now)
        :raises TypeError: if ``max_entries`` is not an int
        :raises ValueError: if ``max_entries`` < 1
        """
        cdef Py_ssize_t budget = <Py_ssize_t>_check_positive(max_entries, "max_entries", 1)
        cdef Py_ssize_t looked = 0
        cdef TimerCore core
        if self._lanes is not None:
            # Each lane in turn, within the one budget.
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                try:
                    looked += core._precascade(budget - looked)
                finally:
                    tw_unlock(&core._counter._mu)
                if looked >= budget:
                    break
            return looked
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._precascade(budget)
            finally:
                tw_unlock(&self._counter._mu)
        return self._precascade(budget)

    cdef Py_ssize_t _precascade(self, Py_ssize_t budget) except -1:
        cdef TimingWheel lower = self._wheel
        cdef TimingWheel wheel = lower._overflow
        cdef TimerTaskList bucket, best = None
        cdef int64_t horizon, best_horizon = 0, best_span = 0, step
        cdef TimerTaskEntry node
        cdef Py_ssize_t looked = 0, n
        cdef int64_t now_ms = _floordiv(self._now_ns(), NS_PER_MS)
        cdef list heap = self._queue._heap
        if now_ms > lower._current_time_ms and (
                not heap or (<TimerTaskList>heap[0])._expiration_ms > now_ms):
            # Nothing is due: bring the wheel's clock (which only moves when a
            # bucket is polled) up to the timer's, as a poll at now would.
            lower._advance(now_ms)
        while wheel is not None:
            horizon = lower._current_time_ms + lower._interval_ms
            for obj in wheel._buckets:
                bucket = <TimerTaskList>obj
                if (bucket._size and bucket._has_expiration
                        and (best is None or bucket._expiration_ms < best._expiration_ms)
                        and 2 * (horizon - bucket._expiration_ms) >= wheel._tick_ms):
                    best = bucket
                    best_horizon = horizon
                    best_span = wheel._tick_ms
            lower = wheel
            wheel = wheel._overflow
        if best is None:
            return 0
        if best is not self._pc_bucket or best._expiration_ms != self._pc_expiration:
            self._pc_bucket = best
            self._pc_expiration = best._expiration_ms
            self._pc_left = 0
            self._pc_horizon = -1
        if self._pc_left <= 0:
            step = best_span // 8 if best_span >= 8 else 1
            if self._pc_horizon >= 0 and best_horizon - self._pc_horizon < step:
                return 0
            self._pc_left = best._size
            self._pc_horizon = best_horizon
        n = budget if budget < self._pc_left else self._pc_left
        while looked < n:
            if best._head == <PyObject *>best:
                self._pc_left = 0
                break
            node = <TimerTaskEntry>best._head
            best._unlink(node)
            # Lands lower if it fits, else back at this bucket's tail (the
            # level's clock has not moved, so its slot is the same one).
            if not self._wheel._add(node):
                self._expire(<TimerTask>node)
                self._ready.append(node)
            looked += 1
        self._pc_left -= looked
        return looked

    def cancel_all(self):
        """Cancel every pending task; return how many were cancelled."""
        cdef list tasks = []
        cdef TimingWheel wheel
        cdef TimerCore core
        for obj in _cores(self):
            core = <TimerCore>obj
            if TW_FT_LOCKS:
                tw_lock(&core._counter._mu)
            wheel = core._wheel
            while wheel is not None:
                for bucket in wheel._buckets:
                    tasks.extend((<TimerTaskList>bucket).entries())
                wheel = wheel._overflow
            tasks.extend([t for t in core._ready if (<TimerTask>t)._state == EXPIRED])
            core._ready = []
            if TW_FT_LOCKS:
                tw_unlock(&core._counter._mu)
        cdef int n = 0
        for task in tasks:
            n += task.cancel()
        return n

    def _close_core(self):
        # Every lane refuses adds before any task is cancelled.
        cdef TimerCore core
        for obj in _cores(self):
            core = <TimerCore>obj
            if TW_FT_LOCKS:
                tw_lock(&core._counter._mu)
            core._closed = True
            if TW_FT_LOCKS:
                tw_unlock(&core._counter._mu)
        self.cancel_all()

    def _run(self, tasks, on_error, bint set_clock=False):
        """Run each task still expired (skipping cancelled/re-added ones).

        Exceptions (``Exception`` subclasses) go to ``on_error(task, exc)``;
        others propagate after the task is marked done.  With ``set_clock``
        the manual clock reads each task's expiration while it runs.

        :return: how many tasks ran
        """
        cdef Py_ssize_t ran = 0
        cdef TimerTask task
        cdef TimerTaskList bucket
        cdef int64_t at
        cdef Py_ssize_t i = 0
        cdef bint is_list = type(tasks) is list
        cdef PyObject *ahead
        cdef PyObject *b
        cdef bint laned = self._lanes is not None
        # The lock of the lane the task expired in (this timer's unless laned).
        cdef tw_mutex *mu = &self._counter._mu
        for obj in tasks:
            if is_list:
                # The node a few entries on, and its pool header (pymalloc
                # reads it when the node is freed after running).
                i += 1
                if i + RUN_PREFETCH_AHEAD <= PyList_GET_SIZE(tasks):
                    ahead = PyList_GET_ITEM(tasks, i + RUN_PREFETCH_AHEAD - 1)
                    TW_PREFETCH(ahead)
                    TW_PREFETCH_PAGE(ahead)
            task = <TimerTask?>obj
            if laned:
                # A laned timer: the lock of the lane the task expired in.
                b = _lock_task(task)
                if b is NULL:
                    continue  # in no bucket: cancelled, running or done
                mu = &(<TimerTaskList>b)._counter._mu
                if task._state != EXPIRED:
                    tw_unlock(mu)
                    continue
            elif TW_FT_LOCKS:
                # EXPIRED -> RUNNING under the timer's lock (a cancel() from
                # another thread takes it too); the task runs unlocked.
                tw_lock(mu)
                if task._state != EXPIRED:
                    tw_unlock(mu)
                    continue
            elif task._state != EXPIRED:
                continue
            tw_store_u8(&task._state, RUNNING)
            bucket = task._list
            if bucket is not None:
                tw_atomic_add_ssize(&bucket._counter.value, -1)
            _set_list(task, None)
            if set_clock:
                at = task._expiration_ms * NS_PER_MS
                if at > self._manual_now_ns:
                    tw_store_i64(&self._manual_now_ns, at)
            if TW_FT_LOCKS:
                tw_unlock(mu)
            ran += 1
            try:
                if type(task) is TimerTask:
                    fn = task._fn
                    if fn is not None:
                        fn(*task._args)
                else:
                    task.run()
            except Exception as exc:
                on_error(task, exc)
            finally:
                if TW_FT_LOCKS:
                    # RUNNING -> DONE under the lock; the callable goes after.
                    # (Re-added by its callable, a task may now be in another
                    # lane, under another lock: its state is read atomically,
                    # and only this thread moves a task out of RUNNING.)
                    tw_lock(mu)
                    if _state_of(task) == RUNNING:
                        fn = task._fn
                        held_args = task._args
                        tw_store_u8(&task._state, DONE)
                        _release(task)
                    tw_unlock(mu)
                    fn = None
                    held_args = None
                elif task._state == RUNNING:
                    tw_store_u8(&task._state, DONE)
                    _release(task)
        return ran

    def _check(self):
        """Raise AssertionError unless wheel, queue and counter agree."""
        cdef TimerCore core
        if self._lanes is not None:
            for obj in _cores(self):
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                try:
                    core._check_unlocked()
                finally:
                    tw_unlock(&core._counter._mu)
            return
        if TW_FT_LOCKS:
            tw_lock(&self._counter._mu)
            try:
                return self._check_unlocked()
            finally:
                tw_unlock(&self._counter._mu)
        return self._check_unlocked()

    cdef object _check_unlocked(self):
        self._wheel._check()
        expired = sum(1 for t in self._ready if (<TimerTask>t)._state == EXPIRED)
        linked = self._wheel._linked()
        if self._counter.value < linked + expired:
            raise AssertionError(
                f"counter {self._counter.value} < linked {linked} + ready {expired}"
            )


cdef list _take_due_laned(TimerCore self, int64_t limit, bint step):
    # TimerCore._take_due on a laned timer: each lane polled under its own
    # lock, their tasks merged by expiration (a stable sort: each lane's own
    # order is kept, as one timer's).  With ``step``: the lanes are polled up
    # to the earliest slot due among them, and on to the next while a slot
    # only moved tasks down a level.
    cdef list cores = _cores(self)
    cdef list out = []
    cdef list keys = []  # each task's expiration, read under its lane's lock
    cdef list part, heap
    cdef TimerCore core
    cdef int64_t upto, head
    cdef Py_ssize_t parts = 0
    while True:
        upto = limit
        if step:
            for obj in cores:
                core = <TimerCore>obj
                tw_lock(&core._counter._mu)
                heap = core._queue._heap
                if heap:
                    head = (<TimerTaskList>heap[0])._expiration_ms
                    if head < upto:
                        upto = head
                tw_unlock(&core._counter._mu)
        for obj in cores:
            core = <TimerCore>obj
            tw_lock(&core._counter._mu)
            try:
                part = core._poll(upto, step)
                if part:
                    # Under the lock: another thread may postpone one of
                    # these (EXPIRED -> PENDING) as soon as it is released.
                    keys.extend([(<TimerTask>t)._expiration_ms for t in part])
            finally:
                tw_unlock(&core._counter._mu)
            if part:
                out.extend(part)
                parts += 1
        if not step or out or upto >= limit:
            break
    if parts > 1:
        out = [out[i] for i in sorted(range(len(out)), key=keys.__getitem__)]
    return out


# -- METH_FASTCALL schedule ---------------------------------------------------
# Cython builds a fresh dict for **kwargs on every call of a def method, even
# with no keywords, and a bound CyFunction adds its own call adapter.  This
# replaces TimerCore.schedule with a METH_FASTCALL | METH_KEYWORDS method
# descriptor (public C API) that builds the dict only when keywords are
# given, written into the type's dict at import through _compat.h's
# tw_type_dict.  Issue 18 measured it: the def costs 17 % more on W1 and
# 15 % on W2-sliding, and 11 % / 10 % with @cython.binding(False).

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

cdef inline object _schedule_small(TimerCore self, long long delay_ms, PyObject *fn):
    # schedule(delay_ms, fn) on a GIL build, one lane, with a valid int
    # delay (_schedule_fastcall checks it with _int_ms) and a callable fn:
    # _schedule_new, _add_new, _expiration_for and _place in one frame of
    # _schedule_fastcall, with the level walk inline (_wheel_link).  With
    # the inline unlink and the METH_NOARGS cancel, tickwheel's own code in
    # a W2-sliding schedule + cancel went from 564 to 463 instructions on
    # 3.14 (bench/README.md, "W1 and W2 per Python version").
    cdef int64_t now_ns, deadline_ns, expiration, ms
    cdef int placed = 0
    cdef TimerTask task
    if self._closed:
        raise RuntimeError("timer is closed")
    if self._ms_clock and delay_ms > 0:
        # The common case, a positive delay on the C clock: the task expires
        # delay_ms after the clock's millisecond, rounded up.  That
        # millisecond is the one the last call saw unless the clock has
        # passed it, so the level and bucket are worked out from the cached
        # value, and the clock reading only decides a (well-predicted)
        # branch: nothing waits for the reading.  Taking the bucket from
        # the reading itself cost ~15 ns a call on 3.14 (bench/README.md).
        # Same expiration and deadline as below, to the nanosecond.
        now_ns = tw_monotonic_ns()
        ms = self._ceil_now_ms(now_ns)
        expiration = ms + delay_ms
        if expiration > C_MAX_EXPIRATION_MS:
            _past_clock_end(delay_ms, _floordiv(now_ns, NS_PER_MS))
        # deadline = now + delay: it lies ms * 10**6 - now (< 1 ms) before
        # the expiration.
        task = _made_task(fn, expiration, delay_ms,
                          <unsigned int>(ms * NS_PER_MS - now_ns))
        placed = _level_link(self, task, expiration)
        if placed == 1:
            return task
        if placed == 3:
            placed = _wheel_link(self._wheel, task, expiration)
            _levels_refresh(self)
        if placed == 0:  # (a wheel whose clock ran ahead of this reading)
            self._expire(task)
            self._ready.append(task)
        if placed != 1:
            self._on_wake()
        return task
    if self._manual:
        now_ns = self._manual_now_ns
    elif TW_HAVE_C_CLOCK and self._fast_clock:
        now_ns = tw_monotonic_ns()
    else:
        now_ns = self._now_ns()
    # Everything that can refuse the task runs before it exists.
    deadline_ns = now_ns + delay_ms * NS_PER_MS
    expiration = _ceil_ms(deadline_ns)
    if self._tick_ms != 1:
        expiration = _ceil_to(expiration, self._tick_ms)
    if expiration > C_MAX_EXPIRATION_MS:
        _past_clock_end(delay_ms, _floordiv(now_ns, NS_PER_MS))
    task = _made_task(fn, expiration, delay_ms, _early_of(expiration, deadline_ns))
    if expiration * NS_PER_MS > now_ns:
        placed = _wheel_link(self._wheel, task, expiration)
    if placed == 0:
        # Due already (a delay of 0 or less): ready for the next poll.
        self._expire(task)
        self._ready.append(task)
    if placed != 1:
        self._on_wake()
    return task


cdef object _schedule_fastcall(object self, PyObject **args, Py_ssize_t nargs,
                               PyObject *kwnames):
    cdef Py_ssize_t i, nkw
    cdef long long small
    if nargs == 2 and (kwnames is NULL or PyTuple_GET_SIZE(<object>kwnames) == 0):
        # schedule(delay_ms, fn): the arguments stay borrowed, no tuple.
        if not TW_CALLABLE(args[1]):
            raise TypeError(f"fn must be callable, got {<object>args[1]!r}")
        if (<TimerCore>self)._lanes is not None:
            return _thread_lane(<TimerCore>self)._schedule_new(<object>args[0], <object>args[1])
        if not TW_FT_LOCKS and TW_INT_EXACT(args[0]) and _int_ms(args[0], &small):
            return _schedule_small(<TimerCore>self, small, args[1])
        return (<TimerCore>self)._schedule_new(<object>args[0], <object>args[1])
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
    cdef TimerCore core = _thread_lane(<TimerCore>self)
    if kwargs is None:  # the common case: no functools.partial to build
        return core._schedule_as(TimerTask, <object>args[0], fn, rest)
    return core._schedule(<object>args[0], fn, rest, kwargs)


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
    return _thread_lane(<TimerCore>self)._schedule_as(task_type, <object>args[1], fn, rest)


cdef tuple _EMPTY = ()
# The method tables, and the bytes their names and docstrings point into,
# live as long as the module.
cdef PyMethodDef _schedule_def, _schedule_as_def, _loop_call_later_def, _loop_call_at_def
cdef PyMethodDef _cancel_def
cdef list _FASTCALL_STRINGS = []


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
    cdef dict tp_dict = tw_type_dict(t)
    tp_dict[name] = PyDescr_NewMethod(t, d)
    PyType_Modified(t)
    return 0


_install_fastcall(&_schedule_def, "schedule", <void *>_schedule_fastcall,
                  "$self, delay_ms, fn, /, *args, **kwargs")
_install_fastcall(&_schedule_as_def, "schedule_as", <void *>_schedule_as_fastcall,
                  "$self, task_type, delay_ms, fn, /, *args")


cdef object _cancel_noargs(object self, PyObject *unused):
    # TimerTask.cancel as METH_NOARGS (the descriptor has checked the type).
    return _task_cancel(<TimerTask>self)


_install_method(<PyTypeObject *>TimerTask, &_cancel_def, "cancel", <void *>_cancel_noargs,
                METH_NOARGS, "$self, /")


# -- the event loop's call_later in C -------------------------------------------
# The tickwheel asyncio loop's call_later was a Python method: its frame, the
# global lookups and the bound call were ~1,400 of the ~3,800 instructions of
# a call_later + cancel (callgrind).  TimerCore._loop_call_later does the same
# work (context copy, delay in ms, schedule_as with the handle type) as one
# METH_FASTCALL | METH_KEYWORDS method; the loop installs the wheel's bound
# method as its instance attribute ``call_later`` while no check is due.

cdef object _h_plain = None    # asyncio's handle types (_asyncio_wheel's
cdef object _h_context = None  # TimerHandle and _ContextTimerHandle)


cdef class _LoopHandle(TimerTask):
    """The base of the asyncio loop's handles: a TimerTask with asyncio's when().

    ``_when_s`` is the ``when`` a ``call_at`` was given.  It is the answer
    only while the task's deadline is still the one it gave (the first
    nanosecond at or after it); after a postpone, or for a ``call_later``,
    ``when()`` is the exact deadline.  Either way a callback that reads the
    loop's clock never sees it below ``when()``.
    """

    def when(self):
        """The scheduled time in loop-time seconds, as asyncio's ``when()``.

        ``call_at(t).when() == t``; otherwise the exact deadline
        (``deadline_ns / 1e9``).  ``expiration_ms`` is the wheel's tick.
        """
        cdef int64_t deadline = self._expiration_ms * NS_PER_MS - self._early_ns
        cdef double w = self._when_s
        cdef int64_t pinned
        if -9.0e9 < w < 9.0e9:  # NaN fails both
            pinned = _when_ns(w)
            # A deadline over 4.3 s in the past reads back clamped (_early_of).
            if pinned == deadline or (self._early_ns == 0xFFFFFFFFU and pinned < deadline):
                return w
        return deadline / 1e9


def _use_loop_handles(plain, with_context):
    """Set the handle types of ``TimerCore._loop_call_later`` (asyncio's layer).

    :raises TypeError: if either is not a _LoopHandle subclass
    """
    global _h_plain, _h_context
    for cls in (plain, with_context):
        # Made without tp_new (_loop_call_at): no __new__ of their own.
        if not (isinstance(cls, type) and issubclass(cls, _LoopHandle)
                and tw_keeps_task_new(cls, TimerTask)):
            raise TypeError(f"handle types must be _LoopHandle subclasses, got {cls!r}")
    _h_plain = plain
    _h_context = with_context


cdef extern from "Python.h":
    object PyContext_CopyCurrent()


cdef object _loop_call_later_py(object self, object delay, object fn, tuple args,
                                object context):
    # The checked path: TimerWheel.call_later (Python) names the argument.
    if context is None:
        return self.call_later(delay, fn, *args)
    return self.call_later(delay, fn, *args, context=context)


cdef object _loop_call_later_fastcall(object self, PyObject **args, Py_ssize_t nargs,
                                      PyObject *kwnames):
    cdef Py_ssize_t i
    cdef Py_ssize_t nkw = 0 if kwnames is NULL else PyTuple_GET_SIZE(<object>kwnames)
    cdef object handle
    if nkw or nargs < 2 or _h_plain is None or not TW_CALLABLE(args[1]):
        # context=, a missing or non-callable fn: TimerWheel.call_later.
        kwargs = {}
        for i in range(nkw):
            kwargs[(<tuple>kwnames)[i]] = <object>args[nargs + i]
        return self.call_later(*[<object>args[i] for i in range(nargs)], **kwargs)
    cdef tuple rest = _EMPTY
    if nargs > 2:
        rest = tuple([<object>args[i] for i in range(2, nargs)])
    delay = <object>args[0]
    fn = <object>args[1]
    ctx = PyContext_CopyCurrent()
    try:
        delay_ms = delay * 1000.0
        if len(ctx):
            handle = _thread_lane(<TimerCore>self)._schedule_as(_h_context, delay_ms, fn, rest)
            handle._context = self._share(ctx)
            return handle
        return _thread_lane(<TimerCore>self)._schedule_as(_h_plain, delay_ms, fn, rest)
    except (TypeError, ValueError, OverflowError):
        pass
    return _loop_call_later_py(self, delay, fn, rest, None)


cdef extern from "Python.h":
    bint PyFloat_CheckExact(object o)
    double PyFloat_AS_DOUBLE(object o)


cdef inline int64_t _when_ns(double w) noexcept nogil:
    # The first nanosecond at or after loop time ``w`` (seconds): the ceiling
    # of the exact product w * 10**9.  ceil(w * 1e9) alone takes the ceiling
    # of the rounded product, which can be below the exact one (27243.545 +
    # 2**-37 gives ...545000000000), and when() then read 1 ulp before
    # ``w``; fma gives the rest of the exact product.
    cdef double d = ceil(w * 1e9)
    cdef double rest = fma(w, 1e9, -d)
    if rest > 0:
        d += ceil(rest)
    return <int64_t>d


cdef object _loop_call_at_fastcall(object self, PyObject **args, Py_ssize_t nargs,
                                   PyObject *kwnames):
    cdef Py_ssize_t i
    cdef Py_ssize_t nkw = 0 if kwnames is NULL else PyTuple_GET_SIZE(<object>kwnames)
    cdef TimerCore core = _thread_lane(<TimerCore>self)
    cdef TimerTask task
    cdef double w = NAN
    cdef int64_t now_ns, deadline_ns, delay_ns
    cdef bint wake
    if nargs >= 1 and not nkw and _h_plain is not None and not core._closed:
        when = <object>args[0]
        if PyFloat_CheckExact(when):
            w = PyFloat_AS_DOUBLE(when)
        elif type(when) is int and -9e15 < when < 9e15:
            w = <double>when
    # NaN fails both comparisons.
    if not (nargs >= 2 and -9.0e9 < w < 9.0e9 and TW_CALLABLE(args[1])):
        # context=, an odd `when` or callback, a closed wheel: TimerWheel.call_at.
        kwargs = {}
        for i in range(nkw):
            kwargs[(<tuple>kwnames)[i]] = <object>args[nargs + i]
        return self.call_at(*[<object>args[i] for i in range(nargs)], **kwargs)
    deadline_ns = _when_ns(w)
    now_ns = core._now_ns()
    delay_ns = deadline_ns - now_ns
    if not -C_MAX_DELAY_MS * NS_PER_MS <= delay_ns <= C_MAX_DELAY_MS * NS_PER_MS:
        return self.call_at(*[<object>args[i] for i in range(nargs)])
    cdef tuple rest = _EMPTY
    if nargs > 2:
        rest = tuple([<object>args[i] for i in range(2, nargs)])
    ctx = PyContext_CopyCurrent()
    cdef bint shared = len(ctx) > 0
    task = <TimerTask>tw_new_instance(_h_context if shared else _h_plain)
    task._fn = <object>args[1]
    task._args = rest
    task._delay_ms = <double>delay_ns / <double>NS_PER_MS
    task._delay_is_int = False
    (<_LoopHandle>task)._when_s = w
    if TW_FT_LOCKS:
        tw_lock(&core._counter._mu)
        try:
            wake = core._add_at(task, now_ns, deadline_ns)
        finally:
            tw_unlock(&core._counter._mu)
    else:
        wake = core._add_at(task, now_ns, deadline_ns)
    if shared:
        (<object>task)._context = self._share(ctx)
    if wake:
        core._on_wake()
    return task


_install_fastcall(&_loop_call_later_def, "_loop_call_later",
                  <void *>_loop_call_later_fastcall,
                  "$self, delay, callback, *args, context=None")
_install_fastcall(&_loop_call_at_def, "_loop_call_at", <void *>_loop_call_at_fastcall,
                  "$self, when, callback, *args, context=None")
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
