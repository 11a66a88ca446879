# _wheel_checks.pxi: included by _wheel.pyx (one extension module).
# Argument checks and the delay conversion: a delay in ms (int or float)
# to nanoseconds, clock and size bounds.  Holds no state.
# Calls: the constants of _wheel.pyx only.

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


cdef extern from "_wheel_inline.h":
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
