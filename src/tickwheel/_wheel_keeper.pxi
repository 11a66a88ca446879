# _wheel_keeper.pxi: included by _wheel.pyx (one extension module).
# Keeping time: the steps of SystemTimer's thread that keeps time (poll
# what is due, counted; cascade early while idle; how long to sleep), in C
# because its idle worker runs them on every wake-up, on caches gone cold
# while it slept (bench/README.md, "The purgatory, Kafka's workload").
# The timer's own methods are called through the instance (_take_due,
# precascade), as the driver's Python did, so a subclass or a test may
# replace them.
# Calls: core (TimerCore._now_ns); of the driver (SystemTimer) it reads
# and writes only its _processed count and its _cascade_early flag.


def _poll_counted(TimerCore timer):
    """What is due now, taken; a due bucket counted in ``timer._processed``.

    One clock reading for both the count and the poll: with two, a bucket
    falling due between them (the driver moves a manual clock, or real time
    passes) was polled but not counted, and a drain loop on advance_clock
    stopped with that bucket's cascaded tasks pending.
    """
    cdef int64_t now_ns = timer._now_ns()
    return _take_counted(timer, now_ns, timer.next_expiration_ms)


cdef object _take_counted(TimerCore timer, int64_t now_ns, object nxt):
    # The poll at now_ns, counted if a bucket is due: ``nxt`` is the next
    # expiration read after that clock reading (the rule above, for both
    # _poll_counted and _keep_time).
    cdef int64_t now_ms = _floordiv(now_ns, NS_PER_MS)
    if nxt is not None and <int64_t>nxt <= now_ms:
        timer._processed += 1
    return timer._take_due(now_ms)


def _precascade_chunk(TimerCore timer, Py_ssize_t chunk):
    """``timer.precascade(chunk)``; True iff it looked at a whole chunk.

    A shorter chunk ended the pass: the caller waits next, rather than
    calling again for nothing.  An error turns early cascading off
    (``timer._cascade_early``: Kafka's way from then on) and is raised for
    the caller to log.
    """
    return _precascade_more(timer, chunk)


cdef bint _precascade_more(TimerCore timer, Py_ssize_t chunk) except -1:
    # _precascade_chunk, for _keep_time without a Python call.
    try:
        return timer.precascade(chunk) >= chunk
    except BaseException:
        timer._cascade_early = False
        raise


def _keep_time(TimerCore timer, handover, Py_ssize_t chunk, int64_t idle_ns):
    """One turn of the idle thread keeping time, on one clock reading.

    A bucket is due: the due tasks, taken and counted as
    :func:`_poll_counted` does, if ``handover`` (a lock) can be taken at
    once, else False (another thread is polling: poll after it).  Else, with
    ``chunk`` > 0 and the next bucket ``idle_ns`` or more away, one chunk of
    early cascading (:func:`_precascade_chunk`): 0 after a whole one (more
    may follow: let other threads run, then call again).  Else how long to
    wait, in ns, until the next bucket is due or precascade may find work
    again (``timer.next_precascade_ms``, while ``timer._cascade_early``);
    None if nothing is pending.
    """
    cdef int64_t now_ns, until, due_in = 0
    cdef bint timed
    while True:
        now_ns = timer._now_ns()
        nxt = timer.next_expiration_ms
        timed = nxt is not None
        if timed:
            due_in = <int64_t>nxt * NS_PER_MS - now_ns
            if due_in <= 0:
                if not handover.acquire(False):
                    return False
                try:
                    return _take_counted(timer, now_ns, nxt)
                finally:
                    handover.release()
        if chunk <= 0 or not timed or due_in < idle_ns:
            break
        if _precascade_more(timer, chunk):
            return 0
        chunk = 0  # the pass ended: time passed, look again, then wait
    if timer._cascade_early:
        at_ms = timer.next_precascade_ms
        if at_ms is not None:
            until = <int64_t>at_ms * NS_PER_MS - now_ns
            if not timed or until < due_in:
                due_in = until
                timed = True
    return due_in if timed else None
