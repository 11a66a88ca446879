# _purgatory_ops.pxi: included by _purgatory.pyx (one extension module).
# The operations: DelayedOperation (a TimerTask with a lock and hooks) and
# CountdownOperation.
# Calls: hooks, lock, and _wheel's TimerTask (cimported).

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
        return tw_hk_call(0, _S_TRY_COMPLETE, op)
    return op._try_c()


cdef inline object _on_complete(DelayedOperation op):
    if tw_maybe_overridden(op) and _hook_mask(op) & _HK_COMPLETE:
        return tw_hk_call(1, _S_ON_COMPLETE, op)
    return op._complete_c()


cdef object _force_complete(DelayedOperation op):
    # op.force_complete(), as the hooks are called: for a Python class that
    # does not override it, DelayedOperation's body without Cython's check.
    if tw_maybe_overridden(op) and _hook_mask(op) & _HK_FORCE:
        return tw_hk_call(3, _S_FORCE_COMPLETE, op)
    return DelayedOperation.force_complete(op)


cdef inline object _on_expiration(DelayedOperation op):
    if tw_maybe_overridden(op) and _hook_mask(op) & _HK_EXPIRE:
        return tw_hk_call(2, _S_ON_EXPIRATION, op)
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
        _op_lock_private(self)
        tw_store_u8(&self._trylock, 1)
    else:
        _check_lock(lock)
        self._oplock = lock
        self._oplocked = False
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
        _op_acquire(self)
        tw_store_ul(&self._holder, _ident())
        try:
            return self._complete_locked()
        finally:
            tw_store_ul(&self._holder, 0)
            _op_release(self)

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
        _op_acquire(self)
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
            _op_release(self)

    def _withdraw(self):
        """Withdraw (never to complete), cancel the timeout; True iff it was open."""
        if tw_load_ul(&self._holder) == _ident():
            return self._withdraw_locked()
        _op_acquire(self)
        tw_store_ul(&self._holder, _ident())
        try:
            return self._withdraw_locked()
        finally:
            tw_store_ul(&self._holder, 0)
            _op_release(self)

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
        return _op_lock_object(self)

    @property
    def _op_lock(self):
        # The twin's attribute: the lock object (made now while the lock is
        # still the inline flag), without handing it out (tests read it).
        return _op_lock_object(self)

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
