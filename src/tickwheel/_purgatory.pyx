# cython: freethreading_compatible=True
"""Compiled hot paths of Kafka's request purgatory.

See ``_purgatory.pxd`` for what is compiled and why, ``purgatory.py`` for
the design and the thread-safety protocol, and ``_purgatory_py.py`` for the
pure-Python twin of every name here; the docstrings below match it, line for
line the logic does too.
"""

cimport cython
from cpython.exc cimport PyErr_CheckSignals
from cpython.object cimport Py_TPFLAGS_HEAPTYPE
from cpython.pyport cimport PY_SSIZE_T_MAX
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


# -- calling the hooks ----------------------------------------------------------
# try_complete, on_complete and on_expiration are cpdef.  Cython's dispatch
# for an object whose class may override them in Python (a heap type, or
# one with a __dict__) looks the name up as an attribute, which builds a
# bound method, and calls that: about 700 instructions a call on 3.11, and
# as much for a Python class that overrides nothing (DelayedProduce).  So
# the purgatory decides once per class, on the GIL builds:
#
# * a hook that no Python class in the MRO defines, on a class with no
#   instance __dict__ and the generic __getattribute__, runs its compiled
#   body directly (the C virtual methods _try_c, _complete_c, _expire_c,
#   which the cpdef hooks delegate to), skipping Cython's check;
# * any other hook is called with PyObject_VectorcallMethod (public since
#   3.9): the same function the attribute would be (instance dict,
#   descriptors, __getattribute__ included), ``self`` prepended, no bound
#   method.
#
# The decision (a bit per hook) is cached per class with the class's
# version tag, which CPython changes whenever the class or a base is
# modified (a hook assigned later is seen).  Free-threaded builds take the
# second way for every Python class: no shared cache to race on.
cdef extern from "_compat.h":
    pass

cdef extern from *:
    """
    static inline int tw_maybe_overridden(PyObject *o) {
        PyTypeObject *t = Py_TYPE(o);
        return t->tp_dictoffset != 0 || PyType_HasFeature(t, Py_TPFLAGS_HEAPTYPE);
    }
    static inline PyObject *tw_call_hook(PyObject *name, PyObject *self) {
        return PyObject_VectorcallMethod(name, &self, 1, NULL);
    }
    static inline int tw_generic_getattr(PyObject *cls) {
        PyTypeObject *t = (PyTypeObject *)cls;
        return t->tp_getattro == PyObject_GenericGetAttr && t->tp_dictoffset == 0;
    }
    static inline unsigned int tw_version_tag(PyObject *cls) {
        return tw_type_version((PyTypeObject *)cls);  /* _compat.h */
    }
    /* The last class decided (GIL builds): a borrowed pointer, valid while
       the tag matches (tags are never reused, so a new class at the same
       address has another). */
    static PyTypeObject *tw_hk_type = NULL;
    static unsigned int tw_hk_tag = 0;
    static int tw_hk_mask = 0;
    static inline int tw_hk_last(PyObject *o) {
        PyTypeObject *t = Py_TYPE(o);
        if (t == tw_hk_type && tw_hk_tag != 0 && tw_type_version(t) == tw_hk_tag)
            return tw_hk_mask;
        return -1;
    }
    static inline void tw_hk_remember(PyObject *o, unsigned int tag, int mask) {
        tw_hk_type = Py_TYPE(o);
        tw_hk_tag = tag;
        tw_hk_mask = mask;
    }
    """
    bint tw_maybe_overridden(object o) noexcept
    object tw_call_hook(object name, object self)
    bint tw_generic_getattr(object cls) noexcept
    unsigned int tw_version_tag(object cls) noexcept
    int tw_hk_last(object o) noexcept
    void tw_hk_remember(object o, unsigned int tag, int mask) noexcept

cdef object _S_TRY_COMPLETE = sys.intern("try_complete")
cdef object _S_ON_COMPLETE = sys.intern("on_complete")
cdef object _S_ON_EXPIRATION = sys.intern("on_expiration")
cdef object _S_FORCE_COMPLETE = sys.intern("force_complete")

# Bits of a class's hook mask: the hook is called through the attribute.
cdef enum:
    _HK_TRY = 1
    _HK_COMPLETE = 2
    _HK_EXPIRE = 4
    _HK_FORCE = 8
    _HK_ALL = 15

# class -> (version tag, mask), behind the one-entry cache in C.
cdef dict _hook_masks = {}


def _hook_cached(cls):
    """The hook mask cached for ``cls`` (bits: try_complete 1, on_complete 2,
    on_expiration 4, force_complete 8 go through the attribute), or None.

    For tests: a Python class used with the purgatory is cached on GIL builds.
    """
    entry = _hook_masks.get(cls)
    if entry is None or (<tuple>entry)[0] != tw_version_tag(cls):
        return None
    return (<tuple>entry)[1]


cdef int _hook_mask(object op) except -1:
    # Which hooks of type(op) go through the attribute (see above).
    cdef int mask
    cdef unsigned int tag
    if not tw_maybe_overridden(op):
        return 0
    if TW_FT_LOCKS:
        return _HK_ALL
    mask = tw_hk_last(op)
    if mask >= 0:
        return mask
    cls = type(op)
    tag = tw_version_tag(cls)
    entry = _hook_masks.get(cls)
    if entry is not None and tag != 0 and (<tuple>entry)[0] == tag:
        mask = (<tuple>entry)[1]
        tw_hk_remember(op, tag, mask)
        return mask
    mask = 0
    if not tw_generic_getattr(cls):
        mask = _HK_ALL
    else:
        for bit, name in ((_HK_TRY, _S_TRY_COMPLETE), (_HK_COMPLETE, _S_ON_COMPLETE),
                          (_HK_EXPIRE, _S_ON_EXPIRATION),
                          (_HK_FORCE, _S_FORCE_COMPLETE)):
            for base in cls.__mro__:
                if name in base.__dict__:
                    if (<type>base).__flags__ & Py_TPFLAGS_HEAPTYPE:
                        mask |= bit
                    break
    getattr(cls, _S_TRY_COMPLETE)  # a lookup through the type cache assigns a tag
    tag = tw_version_tag(cls)
    if tag != 0:
        if len(_hook_masks) >= 256:
            _hook_masks.clear()  # classes made on the fly: keep it bounded
        _hook_masks[cls] = (tag, mask)
        tw_hk_remember(op, tag, mask)
    return mask


# -- the operations' and shards' lock ----------------------------------------------
# With a GIL, _Lock uses the GIL as its mutex: an uncontended acquire is a
# flag test and store, with no system lock allocated.  Issue 18 measured the
# alternative, a PyThread_type_lock per lock (public API, correct without a
# GIL): 5.7 % more instructions per purgatory request (docs/design.md
# "CPython internals"), so the flag stays there.  On a free-threaded build
# (Py_GIL_DISABLED) a PyMutex in the lock (``_mu``, _ftlock.h; compiled out
# with a GIL) takes the GIL's place: see "How it works" below.


# Each class docstring (and __init__ docstring) opens with the constructor's
# signature and a "--" line: CPython serves that as __text_signature__
# (inspect.signature, help(), IDEs) and leaves it out of __doc__.
@cython.final
cdef class _Lock:
    """_Lock()
--

    A non-reentrant lock with threading.Lock's API, taken in C by the purgatory.

    Each operation has one (unless given a shared lock) and so does each
    shard.  The purgatory's hot paths take and release it without a method
    call (threading.Lock's ``acquire`` parses its arguments on every call);
    code that is handed it (:attr:`DelayedOperation.lock`) uses it exactly
    like a ``threading.Lock``: ``acquire(blocking=True, timeout=-1)``,
    ``release()``, ``locked()`` and ``with``.  A blocking acquire releases
    the GIL and can be interrupted by a signal handler that raises.
    """

    # How it works: the state is ``_locked``, read and written only with the
    # GIL held and never across a call that could release it, so an
    # uncontended acquire or release is a flag test and store: no system
    # lock is taken or even allocated.  Only a thread that must wait uses
    # ``_sem``, a system lock allocated on first contention and used as a
    # binary semaphore: it is held ("no signal") unless ``_signaled``.  A
    # waiter counts itself in ``_waiters`` and blocks on ``_sem`` without the
    # GIL; ``_release`` posts one signal when someone waits.  A woken waiter
    # takes the lock if it is still free, else (another thread took it
    # first) waits again: every release with waiters posts a signal, so no
    # wake-up is lost.
    #
    # Free-threaded builds: ``_mu`` (a PyMutex) is the GIL's stand-in.  It
    # guards ``_locked``, ``_signaled``, ``_waiters`` and the allocation of
    # ``_sem``, is held only for those few loads and stores (never while
    # blocking on ``_sem``, never across Python code), and is the innermost
    # lock: nothing else is taken while holding it.  A waiter counts itself
    # under ``_mu`` before it blocks, and _release posts under ``_mu``, so
    # the GIL build's argument carries over unchanged.
    cdef tw_mutex _mu
    cdef PyThread_type_lock _sem
    cdef bint _locked
    cdef bint _signaled
    cdef Py_ssize_t _waiters

    def __dealloc__(self):
        if self._sem is not NULL:
            if not self._signaled:
                PyThread_release_lock(self._sem)
            PyThread_free_lock(self._sem)

    cdef inline bint _try(self) noexcept:
        if TW_FT_LOCKS:
            tw_lock(&self._mu)
            if self._locked:
                tw_unlock(&self._mu)
                return False
            self._locked = True
            tw_unlock(&self._mu)
            return True
        if self._locked:
            return False
        self._locked = True
        return True

    cdef inline bint _is_locked(self) noexcept:
        cdef bint locked
        if TW_FT_LOCKS:
            tw_lock(&self._mu)
            locked = self._locked
            tw_unlock(&self._mu)
            return locked
        return self._locked

    cdef bint _wait(self, double timeout) except -1:
        # Blocking acquire (timeout < 0: forever); True iff acquired.
        cdef PyLockStatus status
        cdef long long micros
        cdef double deadline = 0.0
        if TW_FT_LOCKS:
            return self._wait_ft(timeout)
        if not self._locked:
            self._locked = True
            return True
        if timeout == 0:
            return False
        if self._sem is NULL:
            self._sem = PyThread_allocate_lock()
            if self._sem is NULL:
                raise MemoryError("cannot allocate a lock")
            PyThread_acquire_lock(self._sem, WAIT_LOCK)  # held: no signal yet
        if timeout > 0:
            deadline = _monotonic() + timeout
        self._waiters += 1
        try:
            while True:
                micros = -1 if timeout < 0 else <long long>(timeout * 1e6)
                with nogil:
                    status = PyThread_acquire_lock_timed(self._sem, micros, 1)
                if status == PY_LOCK_ACQUIRED:
                    self._signaled = False  # the signal is consumed
                    if not self._locked:
                        self._locked = True
                        return True
                elif status == PY_LOCK_INTR:
                    # A signal arrived: run its handler (it may raise).
                    PyErr_CheckSignals()
                if not self._locked:  # released while we were not waiting
                    self._locked = True
                    return True
                if timeout > 0:
                    timeout = deadline - _monotonic()
                    if timeout <= 0:
                        return False
        finally:
            self._waiters -= 1

    cdef bint _wait_ft(self, double timeout) except -1:
        # _wait on free-threaded builds: the same steps, the state under _mu.
        cdef PyLockStatus status
        cdef long long micros
        cdef double deadline = 0.0
        cdef PyThread_type_lock sem
        tw_lock(&self._mu)
        if not self._locked:
            self._locked = True
            tw_unlock(&self._mu)
            return True
        if timeout == 0:
            tw_unlock(&self._mu)
            return False
        if self._sem is NULL:
            sem = PyThread_allocate_lock()
            if sem is NULL:
                tw_unlock(&self._mu)
                raise MemoryError("cannot allocate a lock")
            PyThread_acquire_lock(sem, WAIT_LOCK)  # held: no signal yet
            self._sem = sem
        sem = self._sem
        self._waiters += 1
        tw_unlock(&self._mu)
        if timeout > 0:
            deadline = _monotonic() + timeout
        try:
            while True:
                micros = -1 if timeout < 0 else <long long>(timeout * 1e6)
                with nogil:
                    status = PyThread_acquire_lock_timed(sem, micros, 1)
                tw_lock(&self._mu)
                if status == PY_LOCK_ACQUIRED:
                    self._signaled = False  # the signal is consumed
                if not self._locked:
                    self._locked = True
                    tw_unlock(&self._mu)
                    return True
                tw_unlock(&self._mu)
                if status == PY_LOCK_INTR:
                    PyErr_CheckSignals()
                if timeout > 0:
                    timeout = deadline - _monotonic()
                    if timeout <= 0:
                        return False
        finally:
            tw_lock(&self._mu)
            self._waiters -= 1
            tw_unlock(&self._mu)

    cdef inline int _release(self) except -1:
        if TW_FT_LOCKS:
            tw_lock(&self._mu)
            if not self._locked:
                tw_unlock(&self._mu)
                raise RuntimeError("release unlocked lock")
            self._locked = False
            if self._waiters and not self._signaled:
                self._signaled = True
                PyThread_release_lock(self._sem)
            tw_unlock(&self._mu)
            return 0
        if not self._locked:
            raise RuntimeError("release unlocked lock")
        self._locked = False
        if self._waiters and not self._signaled:
            self._signaled = True
            PyThread_release_lock(self._sem)
        return 0

    def acquire(self, bint blocking=True, double timeout=-1):
        """Take the lock; see threading.Lock.acquire.  True iff it was taken."""
        if not blocking:
            if timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            return self._try()
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        return self._wait(timeout)

    def release(self):
        """Release the lock (any thread may); RuntimeError if it is not locked."""
        self._release()

    def locked(self):
        """True iff the lock is held."""
        return self._is_locked()

    def __enter__(self):
        self._wait(-1)
        return True

    def __exit__(self, *exc_info):
        self._release()

    def __repr__(self):
        return f"<{'locked' if self._is_locked() else 'unlocked'} tickwheel lock>"


# The purgatory's lock operations: in C for its own _Lock, by method call for
# any other lock (a shared lock the user passed in).
cdef inline int _acquire(object lock) except -1:
    if type(lock) is _Lock:
        if not TW_FT_LOCKS and not (<_Lock>lock)._locked:
            (<_Lock>lock)._locked = True  # uncontended: _wait's first step, inline
            return 0
        (<_Lock>lock)._wait(-1)
    else:
        lock.acquire()
    return 0


cdef inline bint _try_acquire(object lock) except -1:
    if type(lock) is _Lock:
        return (<_Lock>lock)._try()
    return bool(lock.acquire(False))


cdef inline int _release(object lock) except -1:
    if type(lock) is _Lock:
        (<_Lock>lock)._release()
    else:
        lock.release()
    return 0


cdef inline bint _locked(object lock) except -1:
    if type(lock) is _Lock:
        return (<_Lock>lock)._is_locked()
    return bool(lock.locked())


cdef object _allocate_lock = _Lock

# DelayedOperation's fields follow TimerTask's in one C struct: a _wheel built
# from another _wheel.pxd than this module was would overlap them.
if _TimerTask.__basicsize__ != sizeof(TimerTask):
    raise ImportError(
        "tickwheel._purgatory was built against another tickwheel._wheel "
        f"(TimerTask is {_TimerTask.__basicsize__} bytes, expected "
        f"{sizeof(TimerTask)}): rebuild the extensions together"
    )


cdef inline unsigned long _ident() noexcept:
    return PyThread_get_thread_ident()


cdef inline object _try_complete(DelayedOperation op):
    if tw_maybe_overridden(op) and _hook_mask(op) & _HK_TRY:
        return tw_call_hook(_S_TRY_COMPLETE, op)
    return op._try_c()


cdef inline object _on_complete(DelayedOperation op):
    if tw_maybe_overridden(op) and _hook_mask(op) & _HK_COMPLETE:
        return tw_call_hook(_S_ON_COMPLETE, op)
    return op._complete_c()


cdef object _force_complete(DelayedOperation op):
    # op.force_complete(), as the hooks are called: for a Python class that
    # does not override it, DelayedOperation's body without Cython's check.
    if tw_maybe_overridden(op) and _hook_mask(op) & _HK_FORCE:
        return tw_call_hook(_S_FORCE_COMPLETE, op)
    return DelayedOperation.force_complete(op)


cdef inline object _on_expiration(DelayedOperation op):
    if tw_maybe_overridden(op) and _hook_mask(op) & _HK_EXPIRE:
        return tw_call_hook(_S_ON_EXPIRATION, op)
    return op._expire_c()


cdef inline bint _is_done(object op) noexcept:
    # ``op`` is a DelayedOperation (checked where it entered the purgatory).
    return tw_load_u8(&(<DelayedOperation>op)._done)


def _check_lock(lock):
    if not (
        callable(getattr(lock, "acquire", None))
        and callable(getattr(lock, "release", None))
        and hasattr(lock, "__enter__")
        and hasattr(lock, "__exit__")
    ):
        raise TypeError(
            f"lock must be a threading.Lock/RLock-like object, got {lock!r}"
        )


cdef str _state(DelayedOperation op):
    # An operation's state as its repr shows it.
    if tw_load_u8(&op._withdrawn):
        return "withdrawn"
    if tw_load_u8(&op._expired):
        return "expired"
    if tw_load_u8(&op._done):
        return "completed"
    return "open"


cdef int _op_init(DelayedOperation self, object delay_ms, object lock) except -1:
    # DelayedOperation.__init__'s body (CountdownOperation's calls it in C).
    # TimerTask.__init__(self, delay_ms) for fn=None is the delay_ms
    # setter (the same check and conversion); the setter skips the
    # generic (fn, *args, **kwargs) argument handling, a third of the
    # cost of creating an operation.
    _delay_to_ns(delay_ms, self)  # the delay_ms setter, without the lookup
    if lock is None:
        self._op_lock = _Lock.__new__(_Lock)  # _allocate_lock(), without the call
        tw_store_u8(&self._trylock, 1)
    else:
        _check_lock(lock)
        self._op_lock = lock
        tw_store_u8(&self._trylock, 0)
    # The other fields start as 0/False (C zero-initialised); __init__
    # may run again on the same object, so reset them as the twin does.
    tw_store_ul(&self._holder, 0)
    tw_store_u8(&self._done, 0)
    tw_store_u8(&self._withdrawn, 0)
    tw_store_u8(&self._expired, 0)
    tw_store_u8(&self._submitted, 0)
    tw_store_u8(&self._retry, 0)
    return 0


cdef class DelayedOperation(TimerTask):
    """DelayedOperation(delay_ms, lock=None)
--

    An operation that completes when its condition holds or when it times out.

    Subclass it and override :meth:`try_complete` (check the condition; when it
    holds, ``return self.force_complete()``), :meth:`on_complete` (runs exactly
    once, whichever path completes it) and optionally :meth:`on_expiration`
    (runs after ``on_complete`` iff the timer completed it; :attr:`expired` is
    already True inside ``on_complete`` then).  The operation is its own
    :class:`~tickwheel.TimerTask`, so its timeout is cancelled in O(1).

    Runtime complexity: O(1) to create, complete or expire.

    >>> class Once(DelayedOperation):
    ...     def try_complete(self):
    ...         return self.force_complete()
    ...     def on_complete(self):
    ...         print("done")
    >>> op = Once(100)
    >>> op.try_complete(), op.completed, op.try_complete()
    done
    (True, True, False)

    :param delay_ms: timeout in milliseconds
    :param lock: a ``threading.Lock``/``RLock`` to share with other operations
        (default: a new ``Lock``); try_complete, on_complete and on_expiration
        run under it
    :raises TypeError: if ``lock`` lacks acquire/release or ``delay_ms`` is no number
    """

    def __init__(self, delay_ms, lock=None):
        """__init__($self, delay_ms, lock=None)
--

Initialize self.  See help(type(self)) for accurate signature."""
        _op_init(self, delay_ms, lock)

    # -- subclass hooks -----------------------------------------------------
    cpdef try_complete(self):
        """Check the condition; if it holds, ``return self.force_complete()``.

        Subclasses override this.  The purgatory calls it with the lock held.

        :return: True iff this call completed the operation
        """
        return self._try_c()

    cpdef on_complete(self):
        """Called exactly once, under the lock, by whichever path completes it."""
        return self._complete_c()

    cpdef on_expiration(self):
        """Called after :meth:`on_complete`, under the lock, iff the timer won."""
        return self._expire_c()

    # The hooks' bodies, as C virtual methods: a compiled subclass overrides
    # these (and keeps the cpdef for its docstring), so the purgatory can
    # run the right body without Cython's per-call Python-override check
    # for a Python class that overrides no hook (see "calling the hooks").
    cdef object _try_c(self):
        raise NotImplementedError(f"{type(self).__name__} must override try_complete()")

    cdef object _complete_c(self):
        return None

    cdef object _expire_c(self):
        return None

    # -- completion -----------------------------------------------------------
    cpdef force_complete(self):
        """Complete now unless already completed: cancel the timeout, run on_complete.

        Safe to call from any thread and from inside :meth:`try_complete`.
        When another thread completes it first, this returns False.  If you call
        it while holding a *shared* lock yourself, pass an ``RLock``.

        Runtime complexity: O(1).

        :return: True for the one caller that completed the operation
        """
        if tw_load_u8(&self._done):
            return False
        if tw_load_ul(&self._holder) == _ident():
            # Inside try_complete: the lock is already ours (the hot path).
            tw_store_u8(&self._done, 1)
            _cancel_task(self)
            _on_complete(self)
            return True
        lock = self._op_lock
        _acquire(lock)
        tw_store_ul(&self._holder, _ident())
        try:
            return self._complete_locked()
        finally:
            tw_store_ul(&self._holder, 0)
            _release(lock)

    def _complete_locked(self):
        # Caller holds the lock: the check-and-set below is atomic.
        if tw_load_u8(&self._done):
            return False
        tw_store_u8(&self._done, 1)
        _cancel_task(self)  # the TimerTask entry: O(1) unlink
        _on_complete(self)
        return True

    def run(self):
        """Timer callback: complete the operation as expired (Kafka's ``run``)."""
        lock = self._op_lock
        _acquire(lock)
        tw_store_ul(&self._holder, _ident())
        try:
            if tw_load_u8(&self._done):
                return
            tw_store_u8(&self._done, 1)
            tw_store_u8(&self._expired, 1)
            _on_complete(self)
            _on_expiration(self)
        finally:
            tw_store_ul(&self._holder, 0)
            _release(lock)

    def _withdraw(self):
        """Withdraw (never to complete), cancel the timeout; True iff it was open."""
        if tw_load_ul(&self._holder) == _ident():
            return self._withdraw_locked()
        with self._op_lock:
            tw_store_ul(&self._holder, _ident())
            try:
                return self._withdraw_locked()
            finally:
                tw_store_ul(&self._holder, 0)

    def _withdraw_locked(self):
        if tw_load_u8(&self._done):
            return False
        tw_store_u8(&self._done, 1)
        tw_store_u8(&self._withdrawn, 1)
        _cancel_task(self)
        return True

    # -- state ------------------------------------------------------------------
    @property
    def completed(self):
        """True once on_complete has been started by some path (Kafka's isCompleted)."""
        return <bint>tw_load_u8(&self._done) and not tw_load_u8(&self._withdrawn)

    @property
    def expired(self):
        """True iff the timer completed it (set before on_complete runs)."""
        return <bint>tw_load_u8(&self._expired)

    @property
    def withdrawn(self):
        """True iff cancel_for_key removed it before it completed."""
        return <bint>tw_load_u8(&self._withdrawn)

    @property
    def lock(self):
        """The lock held around try_complete, on_complete and on_expiration.

        Once handed out, other code may hold it, so from then on purgatory
        threads wait for it rather than leave a retry to its holder.
        """
        tw_store_u8(&self._trylock, 0)
        return self._op_lock

    # The flags under the pure twin's attribute names, read-only: tests,
    # purgatory.py's purge and bench/stress.py read them from Python.
    @property
    def _op_holder(self):
        return tw_load_ul(&self._holder)

    @property
    def _op_done(self):
        return <bint>tw_load_u8(&self._done)

    @property
    def _op_withdrawn(self):
        return <bint>tw_load_u8(&self._withdrawn)

    @property
    def _op_expired(self):
        return <bint>tw_load_u8(&self._expired)

    @property
    def _op_submitted(self):
        return <bint>tw_load_u8(&self._submitted)

    @property
    def _op_retry(self):
        return <bint>tw_load_u8(&self._retry)

    @property
    def _op_trylock(self):
        return <bint>tw_load_u8(&self._trylock)

    def __repr__(self):
        return f"<{type(self).__name__} delay_ms={self.delay_ms!r} {_state(self)}>"


cdef class CountdownOperation(DelayedOperation):
    """CountdownOperation(delay_ms, callback=None, count=1, lock=None)
--

    A DelayedOperation that completes once :meth:`count_down` has taken its
    count to zero (Kafka's DelayedProduce waits for its partitions' acks
    this way), or expires after ``delay_ms``.

    Its ``try_complete`` is one comparison in C and its ``on_complete``
    calls ``callback(op)``, so a purgatory runs no Python code per try:
    the shape for operations created by the hundred thousand.  Events call
    ``count_down()`` and then the purgatory's ``check_and_complete(key)``
    as for any operation; ``count_down`` alone completes nothing.
    Subclasses may override the hooks like any DelayedOperation's.

    Runtime complexity: O(1) to create, count down, complete or expire.

    >>> from tickwheel import CountdownOperation, DelayedOperationPurgatory, MockTimer
    >>> timer = MockTimer()
    >>> purgatory = DelayedOperationPurgatory("acks", timer)
    >>> def done(op):
    ...     print("expired" if op.expired else "acked")
    >>> op = CountdownOperation(500, done, 2)
    >>> purgatory.try_complete_else_watch(op, ["topic-0"])
    False
    >>> op.count_down(), purgatory.check_and_complete("topic-0")
    (1, 0)
    >>> op.count_down(), purgatory.check_and_complete("topic-0")
    acked
    (0, 1)

    :param delay_ms: timeout in milliseconds
    :param callback: called as ``callback(op)`` exactly once, under the lock,
        when the operation completes or expires (``op.expired`` says which);
        None for no call.  The operation drops it after the call.
    :param count: events to wait for, an int >= 0 (0: completes on the first try)
    :param lock: as for DelayedOperation
    :raises TypeError: if ``callback`` is not callable or ``count`` is not an int
    :raises ValueError: if ``count`` is negative
    """

    def __init__(self, delay_ms, callback=None, count=1, lock=None):
        """__init__($self, delay_ms, callback=None, count=1, lock=None)
--

Initialize self.  See help(type(self)) for accurate signature."""
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {callback!r}")
        cdef Py_ssize_t n = 1 if count is 1 else _count_arg(count, "count")
        _op_init(self, delay_ms, lock)
        self._callback = callback
        tw_atomic_store_ssize(&self._count, n)

    @property
    def count(self):
        """Events still awaited (0 once the countdown is done)."""
        return tw_atomic_load_ssize(&self._count)

    def count_down(self, n=1):
        """Take ``n`` (an int >= 0, default 1) off the count; it stops at 0.

        Safe from any thread.  It does not complete the operation: call the
        purgatory's ``check_and_complete`` for a key the operation watches
        (or :meth:`force_complete`).

        :return: the count left
        :raises TypeError: if ``n`` is not an int
        :raises ValueError: if ``n`` is negative
        """
        # The default skips the checks (``is``: the small int 1 is one object).
        cdef Py_ssize_t k = 1 if n is 1 else _count_arg(n, "n")
        cdef Py_ssize_t left
        with cython.critical_section(self):
            # The decrement under the critical section (one at a time); the
            # store atomic, as the purgatory's scan reads it without one.
            left = tw_atomic_load_ssize(&self._count)
            left = left - k if left > k else 0
            tw_atomic_store_ssize(&self._count, left)
        return left

    cpdef try_complete(self):
        """Complete iff the count is zero."""
        return self._try_c()

    cpdef on_complete(self):
        """Call ``callback(self)`` (if one was given), then drop it."""
        return self._complete_c()

    cdef object _try_c(self):
        if tw_atomic_load_ssize(&self._count):
            return False
        return _force_complete(self)

    cdef object _complete_c(self):
        callback = self._callback
        if callback is not None:
            self._callback = None
            callback(self)
        return None

    def __repr__(self):
        return (
            f"<{type(self).__name__} delay_ms={self.delay_ms!r} "
            f"count={self.count} {_state(self)}>"
        )


cdef Py_ssize_t _count_arg(object value, str name) except -1:
    # In C on the common path: an exact int is converted, then compared.
    cdef Py_ssize_t n
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    try:
        n = value
    except OverflowError:
        n = -1 if value < 0 else PY_SSIZE_T_MAX
        if n > 0:
            raise ValueError(f"{name} must be <= {PY_SSIZE_T_MAX}, got {value!r}") from None
    if n < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return n


@cython.final
cdef class _Shard:
    """_Shard()
--

    A slice of the key space: key -> watcher list, and the lock writers take."""

    def __init__(self):
        """__init__($self)
--

Initialize self.  See help(type(self)) for accurate signature."""
        self.lock = _allocate_lock()
        self.watchers = {}


# -- the two hot paths ------------------------------------------------------------
# Every watched operation is a DelayedOperation of this module (the
# purgatory checks each new operation type once, see _check_op_type), so
# the loops read its C fields through unchecked casts.


cdef bint _hand_off(DelayedOperation op) except -1:
    """``op``'s private lock is taken: leave its holder a retry, or take the lock."""
    tw_store_u8(&op._retry, 1)
    lock = op._op_lock
    if not _try_acquire(lock):
        if tw_load_u8(&op._trylock):
            return False
        _acquire(lock)
    # This thread tries now, after every event that set the flag so far.
    tw_store_u8(&op._retry, 0)
    return True


cdef bint _retry(DelayedOperation op, unsigned long ident) except -1:
    """Try ``op`` again while other threads keep flagging it (Kafka's retry loop)."""
    lock = op._op_lock
    cdef bint completed = False
    while tw_load_u8(&op._retry) and not tw_load_u8(&op._done):
        if not _try_acquire(lock):
            return completed
        tw_store_u8(&op._retry, 0)
        tw_store_ul(&op._holder, ident)
        try:
            if _try_complete(op):
                completed = True
        finally:
            tw_store_ul(&op._holder, 0)
            _release(lock)
    return completed


cdef object _watch(_PurgatoryCore self, DelayedOperation operation, object keys):
    # try_complete_else_watch after the argument checks (see the twin).
    cdef Py_ssize_t n = len(keys)
    cdef list shards = self._shards
    cdef Py_ssize_t mask = self._mask
    cdef unsigned long ident = _ident()
    cdef _Shard shard
    cdef list ops
    cdef bint completed = False
    cdef Py_ssize_t pending
    error = None
    tw_store_u8(&operation._submitted, 1)
    lock = operation._op_lock
    _acquire(lock)
    tw_store_ul(&operation._holder, ident)
    try:
        if _try_complete(operation):
            return True
        for key in keys:
            shard = <_Shard>shards[hash(key) & mask]
            shard_lock = shard.lock
            _acquire(shard_lock)
            try:
                ops = shard.watchers.get(key)
                if ops is None:
                    shard.watchers[key] = [operation]
                else:
                    ops.append(operation)
            finally:
                _release(shard_lock)
        # An estimate (a lost update only delays a purge): an atomic add
        # on free-threaded builds, a plain one with the GIL.
        tw_atomic_add_ssize(&self._n_estimated, 1)
        try:
            completed = _try_complete(operation)
        except BaseException as exc:  # still time it out, then re-raise
            error = exc
    finally:
        tw_store_ul(&operation._holder, 0)
        _release(lock)
    if tw_load_u8(&operation._retry) and not tw_load_u8(&operation._done):
        # A check found the lock taken while we held it: try for it.
        try:
            completed = _retry(operation, ident) or completed
        except BaseException as exc:
            if error is None:
                error = exc
    timer = self._timer
    if not tw_load_u8(&operation._done):
        if self._c_timer:
            _timer_add(<TimerCore>timer, operation)
        else:
            timer.add(operation)
        if tw_load_u8(&operation._done):
            # Completed between the unlock and the add: drop the timer entry.
            _cancel_task(operation)
    if self._c_timer:
        pending = _timer_len(<TimerCore>timer)
    else:
        pending = len(timer)
    if tw_atomic_load_ssize(&self._n_estimated) - pending > self._purge_interval:
        self._purge_if_due()
    if error is not None:
        raise error
    return completed


cdef object _check(_PurgatoryCore self, _Shard shard, object key, list ops):
    # check_and_complete's scan of ``ops`` (see the twin).
    cdef unsigned long ident = _ident()
    cdef Py_ssize_t completed = 0
    cdef Py_ssize_t dropped = 0
    cdef list keep = []
    cdef bint ok
    cdef DelayedOperation op
    error = None
    for item in ops:
        op = <DelayedOperation>item
        if tw_load_u8(&op._done):
            dropped += 1
            continue
        if (type(op) is CountdownOperation
                and tw_atomic_load_ssize(&(<CountdownOperation>op)._count)):
            # Not ready, so its try_complete would return False: skip the
            # lock.  The count only falls, and the thread that takes it to
            # zero checks a key of the operation afterwards.
            keep.append(op)
            continue
        lock = op._op_lock
        if not tw_load_u8(&op._trylock):
            _acquire(lock)  # a shared lock: wait for it
        elif not _locked(lock):
            # Free a moment ago (if another thread took it meanwhile, this
            # waits for it, which is merely slower).
            _acquire(lock)
        elif not _hand_off(op):
            keep.append(op)  # its holder tries again for us
            continue
        tw_store_ul(&op._holder, ident)
        try:
            ok = _try_complete(op)
        except BaseException as exc:
            ok = False
            if error is None:
                error = exc
            else:
                self._log_error(op, exc)
        finally:
            tw_store_ul(&op._holder, 0)
            _release(lock)
        if tw_load_u8(&op._retry):
            # Flagged by another thread while we held the lock (or before):
            # try again.  The flag is cleared under the lock only by the
            # thread about to try, so it is never lost.
            try:
                ok = _retry(op, ident) or ok
            except BaseException as exc:
                if error is None:
                    error = exc
                else:
                    self._log_error(op, exc)
            if not ok and tw_load_u8(&op._done):
                dropped += 1  # completed by another thread meanwhile
                continue
        if ok:
            completed += 1
            dropped += 1
        else:
            keep.append(op)
    if dropped:
        _replace(shard, key, ops, keep, len(keep) + dropped)
    if error is not None:
        raise error
    return completed


cdef int _replace(
    _Shard shard, object key, list scanned, list keep, Py_ssize_t seen
) except -1:
    # Install the live operations a scan collected from ``scanned`` (its
    # first ``seen`` entries) plus whatever was appended after the scan.
    # Lists are replaced, never edited, so a concurrent scan of the old list
    # never skips an entry.
    cdef list ops
    shard_lock = shard.lock
    _acquire(shard_lock)
    try:
        watchers = shard.watchers
        ops = watchers.get(key)
        if ops is None:
            return 0
        if ops is scanned:
            if len(ops) > seen:
                keep.extend(ops[seen:])
        else:  # replaced meanwhile (another scan or a purge): filter it
            keep = [op for op in ops if not _is_done(op)]
            if len(keep) == len(ops):
                return 0
        if keep:
            watchers[key] = keep
        else:
            del watchers[key]
    finally:
        _release(shard_lock)
    return 0


cdef class _PurgatoryCore:
    """_PurgatoryCore()
--

    The hot paths of DelayedOperationPurgatory (try, watch, check)."""

    @property
    def _estimated(self):
        # Completed-but-watched operations, an estimate: every thread adds
        # to it and the purge resets it, so it is read and written
        # atomically (plain with a GIL).
        return tw_atomic_load_ssize(&self._n_estimated)

    @_estimated.setter
    def _estimated(self, Py_ssize_t value):
        tw_atomic_store_ssize(&self._n_estimated, value)

    def try_complete_else_watch(self, operation, keys):
        """Complete ``operation`` now if it can, else watch it under ``keys``, timed.

        Under the operation's lock: try; if not complete, add it to the watcher
        list of every key, then try once more (so an event between the first
        try and the watch is not missed); if still not complete, add it to the
        timer, and cancel that timer entry if it completed meanwhile.  An event
        whose check found the lock taken while this call held it is honoured
        by trying again after the lock is released (see
        :meth:`check_and_complete`).

        Runtime complexity: O(len(keys) + timer levels).

        :param operation: a DelayedOperation not submitted before
        :param keys: a non-empty iterable of hashable keys (duplicates count once)
        :return: True iff the operation completed during this call
        :raises TypeError: if ``operation`` is not a DelayedOperation for this
            timer's core, ``keys`` is a str/bytes or not iterable, or a key is
            unhashable
        :raises ValueError: if ``keys`` is empty or the operation was submitted
        :raises RuntimeError: after shutdown()
        Nothing is registered when it raises one of these.
        """
        if self._shut:
            raise RuntimeError(f"purgatory {self._name!r} is shut down")
        if type(operation) is not self._last_op_type:
            if type(operation) not in self._op_types:
                self._check_op_type(operation)
            self._last_op_type = type(operation)
        if (
            tw_load_u8(&(<DelayedOperation>operation)._submitted)
            or _is_done(operation)
        ):
            raise ValueError(
                f"operation {operation!r} was already submitted or completed"
            )
        if type(keys) is not tuple and type(keys) is not list:
            keys = self._keys_tuple(keys)
        cdef Py_ssize_t n = len(keys)
        # Validate every key before registering anything; equal keys count once.
        try:
            if n == 1:
                hash(keys[0])
            elif n == 0:
                raise ValueError(f"keys must not be empty, got {keys!r}")
            elif len(set(keys)) != n:
                keys = tuple(dict.fromkeys(keys))
        except TypeError:
            for key in keys:
                _hash_key(key, f"key {key!r} in keys")
            raise
        return _watch(self, <DelayedOperation>operation, keys)

    def check_and_complete(self, key):
        """Try to complete every operation watching ``key``; drop completed entries.

        Call it after an event that may satisfy operations watching ``key``.
        Each operation's ``try_complete`` runs under its lock, outside the
        watcher list's lock.  A key whose list becomes empty disappears.  If
        try_complete/on_complete raises, the other operations are still tried
        and the first exception is re-raised at the end.

        An operation whose own (private) lock is held by another thread right
        now (the timer expiring it, another check, try_complete_else_watch) is
        not waited for: this call flags it, and the holder tries it again
        after releasing the lock (Kafka's ``maybeTryComplete``), so the event
        is still seen.  Operations on a shared lock are waited for.

        Runtime complexity: O(operations watching ``key``), one pass.

        :return: how many operations this call completed
        :raises TypeError: if ``key`` is unhashable
        """
        cdef _Shard shard
        try:
            shard = <_Shard>self._shards[hash(key) & self._mask]
        except TypeError:
            raise TypeError(f"key must be hashable, got {key!r}") from None
        # A dict read is atomic; writers (watch, compaction) take shard.lock.
        ops = shard.watchers.get(key)
        if ops is None:
            return 0
        return _check(self, shard, key, <list>ops)

    def _log_error(self, op, exc):
        logger.error(
            "purgatory %r: try_complete of %r raised", self._name, op, exc_info=exc
        )


def _hash_key(key, what):
    try:
        return hash(key)
    except TypeError:
        raise TypeError(f"{what} must be hashable, got {key!r}") from None


def _new_operation(type cls, delay_ms):
    """A new ``cls`` with ``delay_ms`` and a private lock, without calling its __init__.

    For DelayedOperation subclasses created by the million that fill their
    own fields right after (say one operation per replayed request):
    the state is what ``DelayedOperation.__init__(op, delay_ms)`` leaves.

    :raises TypeError: if ``cls`` is not a DelayedOperation subclass, or as
        DelayedOperation for ``delay_ms``
    """
    return _fresh(cls, delay_ms)


cdef DelayedOperation _fresh(type cls, object delay_ms):
    # tp_new leaves every flag False and _holder 0 (zeroed C fields), as
    # __init__ would set them; only the delay and the lock remain.
    cdef DelayedOperation op = cls.__new__(cls)
    _delay_to_ns(delay_ms, op)  # the delay_ms setter, without the attribute lookup
    op._op_lock = _Lock.__new__(_Lock)  # _allocate_lock(), without the call
    tw_store_u8(&op._trylock, 1)
    return op
