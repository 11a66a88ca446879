# _purgatory_lock.pxi: included by _purgatory.pyx (one extension module).
# The operations' and shards' lock (_Lock: the GIL as mutex, a PyMutex on
# free-threaded builds) and the purgatory's lock operations.
# Calls: _ftlock.h (through _wheel.pxd).

# -- the operations' and shards' lock ----------------------------------------------
# With a GIL, _Lock uses the GIL as its mutex: an uncontended acquire is a
# flag test and store, with no system lock allocated.  The alternative, a
# PyThread_type_lock per lock (public API, correct without a GIL), costs
# the purgatory more instructions per request (docs/design.md, "CPython
# internals", has the measurement), so the flag stays there.  On a free-threaded build
# (Py_GIL_DISABLED) a PyMutex in the lock (``_mu``, _ftlock.h; compiled out
# with a GIL) takes the GIL's place: see "How it works" below.


# Each class docstring (and __init__ docstring) opens with the constructor's
# signature and a "--" line: CPython serves that as __text_signature__
# (inspect.signature, help(), IDEs) and leaves it out of __doc__.
# A free list: each operation makes one and drops it when done, so the
# allocator is skipped (about 90 instructions a request; Cython leaves
# free lists out of free-threaded builds).
@cython.final
@cython.freelist(256)
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


# -- the operations' private lock ------------------------------------------------
# Most operations never meet a second thread at their lock, so on a GIL
# build an operation's private lock starts as a flag in the operation
# (_oplocked, with _oplock None) and becomes a _Lock only when code asks
# for it as an object (DelayedOperation.lock) or a thread must wait for it
# (its holder released the GIL inside a hook).  The _Lock starts in the
# flag's state, and from then on every path uses it: each one reads _oplock
# again on every call, never keeping it across code that can release the
# GIL.  Free-threaded builds make the _Lock at once (its PyMutex is what
# guards the state there).


cdef inline int _op_lock_private(DelayedOperation op) except -1:
    # A new private lock: the inline flag, or a _Lock on free-threaded builds.
    if TW_FT_LOCKS:
        op._oplock = _Lock.__new__(_Lock)  # _allocate_lock(), without the call
    else:
        op._oplock = None
    op._oplocked = False
    return 0


cdef object _op_lock_object(DelayedOperation op):
    # The lock as an object, made now from the flag if need be.
    lock = op._oplock
    if lock is not None:
        return lock
    made = _Lock.__new__(_Lock)
    # The allocation may run a collection, and so other threads' code:
    # read the operation again after it.
    lock = op._oplock
    if lock is not None:
        return lock
    (<_Lock>made)._locked = op._oplocked
    op._oplock = made
    return made


cdef inline int _op_acquire(DelayedOperation op) except -1:
    if not TW_FT_LOCKS and op._oplock is None:
        if not op._oplocked:
            op._oplocked = True
            return 0
        return _acquire(_op_lock_object(op))  # held elsewhere: wait on a _Lock
    return _acquire(op._oplock)


cdef inline bint _op_try_acquire(DelayedOperation op) except -1:
    if not TW_FT_LOCKS and op._oplock is None:
        if op._oplocked:
            return False
        op._oplocked = True
        return True
    return _try_acquire(op._oplock)


cdef inline int _op_release(DelayedOperation op) except -1:
    if not TW_FT_LOCKS and op._oplock is None:
        if not op._oplocked:
            raise RuntimeError("release unlocked lock")
        op._oplocked = False
        return 0
    return _release(op._oplock)


cdef inline bint _op_locked(DelayedOperation op) except -1:
    if not TW_FT_LOCKS and op._oplock is None:
        return op._oplocked
    return _locked(op._oplock)


cdef object _allocate_lock = _Lock
