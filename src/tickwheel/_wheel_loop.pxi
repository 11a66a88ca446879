# _wheel_loop.pxi: included by _wheel.pyx (one extension module).
# The asyncio loop's paths: TimerCore._loop_call_later and _loop_call_at
# in C, with what the asyncio layer registers (_use_loop_handles: its
# handle types, its checked call_later/call_at and its context sharing),
# and _LoopHandle, the handles' base (asyncio's when()).
# Calls: fastcall (_install_fastcall), place (_schedule_as, _add), lanes;
# of the layer above, only what it registered.

# -- the event loop's call_later in C -------------------------------------------
# The tickwheel asyncio loop's call_later was a Python method: its frame, the
# global lookups and the bound call were ~1,400 of the ~3,800 instructions of
# a call_later + cancel (callgrind).  TimerCore._loop_call_later does the same
# work (context copy, delay in ms, schedule_as with the handle type) as one
# METH_FASTCALL | METH_KEYWORDS method; the loop installs the wheel's bound
# method as its instance attribute ``call_later`` while no check is due.

# Registered by the asyncio layer (_asyncio_wheel) through _use_loop_handles:
cdef object _h_plain = None      # its handle types (TimerHandle and
cdef object _h_context = None    # _ContextTimerHandle)
cdef object _slow_later = None   # TimerWheel.call_later, TimerWheel.call_at:
cdef object _slow_at = None      # what the C paths refuse goes there
cdef object _share_context = None  # TimerWheel._share: a new handle's context


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


def _use_loop_handles(plain, with_context, call_later, call_at, share):
    """Register the asyncio layer with ``TimerCore._loop_call_later``/``_loop_call_at``.

    ``plain`` and ``with_context`` are the handle types they make (the
    second when the current context holds variables);
    ``call_later(wheel, delay, callback, *args, context=None)`` and
    ``call_at(wheel, when, ...)`` take every call they refuse, to check
    it and raise naming the argument; ``share(wheel, context)`` gives the
    context a new handle keeps.  The core calls nothing of the layer above
    it but these.

    :raises TypeError: if a handle type is not a _LoopHandle subclass, or
        a function is not callable
    """
    global _h_plain, _h_context, _slow_later, _slow_at, _share_context
    for cls in (plain, with_context):
        # Made without tp_new (_loop_call_at): no __new__ of their own.
        if not (isinstance(cls, type) and issubclass(cls, _LoopHandle)
                and tw_keeps_task_new(cls, TimerTask)):
            raise TypeError(f"handle types must be _LoopHandle subclasses, got {cls!r}")
    for fn in (call_later, call_at, share):
        if not callable(fn):
            raise TypeError(f"call_later, call_at and share must be callable, got {fn!r}")
    _h_plain = plain
    _h_context = with_context
    _slow_later = call_later
    _slow_at = call_at
    _share_context = share


cdef extern from "Python.h":
    object PyContext_CopyCurrent()


cdef object _loop_slow(object slow, object self, PyObject **args, Py_ssize_t nargs,
                       PyObject *kwnames):
    # The checked path the layer registered (TimerWheel.call_later or
    # call_at, in Python), with the call's arguments as given.
    if slow is None:
        raise TypeError(
            f"{type(self).__name__} has no asyncio layer: _use_loop_handles was not called"
        )
    cdef Py_ssize_t i
    cdef Py_ssize_t nkw = 0 if kwnames is NULL else PyTuple_GET_SIZE(<object>kwnames)
    kwargs = {}
    for i in range(nkw):
        kwargs[(<tuple>kwnames)[i]] = <object>args[nargs + i]
    return slow(self, *[<object>args[i] for i in range(nargs)], **kwargs)


cdef object _loop_call_later_fastcall(object self, PyObject **args, Py_ssize_t nargs,
                                      PyObject *kwnames):
    cdef Py_ssize_t i
    cdef Py_ssize_t nkw = 0 if kwnames is NULL else PyTuple_GET_SIZE(<object>kwnames)
    cdef object handle
    if nkw or nargs < 2 or _h_plain is None or not TW_CALLABLE(args[1]):
        # context=, a missing or non-callable fn: TimerWheel.call_later.
        return _loop_slow(_slow_later, self, args, nargs, kwnames)
    cdef tuple rest = _EMPTY
    if nargs > 2:
        rest = tuple([<object>args[i] for i in range(2, nargs)])
    delay = <object>args[0]
    fn = <object>args[1]
    ctx = PyContext_CopyCurrent()
    try:
        delay_ms = delay * 1000.0
        if len(ctx):
            handle = _schedule_as(_thread_lane(<TimerCore>self), _h_context, delay_ms, fn, rest)
            handle._context = _share_context(self, ctx)
            return handle
        return _schedule_as(_thread_lane(<TimerCore>self), _h_plain, delay_ms, fn, rest)
    except (TypeError, ValueError, OverflowError):
        pass
    return _slow_later(self, delay, fn, *rest)


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
        return _loop_slow(_slow_at, self, args, nargs, kwnames)
    deadline_ns = _when_ns(w)
    now_ns = core._now_ns()
    delay_ns = deadline_ns - now_ns
    if not -C_MAX_DELAY_MS * NS_PER_MS <= delay_ns <= C_MAX_DELAY_MS * NS_PER_MS:
        return _loop_slow(_slow_at, self, args, nargs, NULL)
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
    # The task keeps the exact deadline ``when`` gave, on the clock reading
    # ``now_ns`` it was measured from.
    if TW_FT_LOCKS:
        tw_lock(&core._counter._mu)
        try:
            wake = _add(core, task, now_ns, delay_ns, True)
        finally:
            tw_unlock(&core._counter._mu)
    else:
        wake = _add(core, task, now_ns, delay_ns, True)
    if shared:
        (<object>task)._context = _share_context(self, ctx)
    if wake:
        core._on_wake()
    return task
