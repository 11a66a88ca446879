p = "src/tickwheel/_purgatory.pyx"
s = open(p).read()
a = s.index("    # How it works: the state is ``_locked``")
b = s.index("    def acquire(self, bint blocking=True, double timeout=-1):")
s = (
    s[:a]
    + """    # How it works: the state is a system lock (``PyThread_type_lock``,
    # public C API), so the lock holds without the GIL too (free-threaded
    # builds).  ``_locked`` mirrors it for locked(), repr and the "release
    # unlocked lock" error; only the holder writes it (set after acquiring,
    # cleared before releasing), as threading.Lock did up to 3.12.
    cdef PyThread_type_lock _sem
    cdef bint _locked

    def __cinit__(self):
        self._sem = PyThread_allocate_lock()
        if self._sem is NULL:
            raise MemoryError("cannot allocate a lock")

    def __dealloc__(self):
        if self._sem is not NULL:
            PyThread_free_lock(self._sem)

    cdef inline bint _try(self) noexcept:
        if PyThread_acquire_lock(self._sem, NOWAIT_LOCK):
            self._locked = True
            return True
        return False

    cdef bint _wait(self, double timeout) except -1:
        # Blocking acquire (timeout < 0: forever); True iff acquired.
        cdef PyLockStatus status
        cdef long long micros
        cdef double deadline = 0.0
        if self._try():
            return True
        if timeout == 0:
            return False
        if timeout > 0:
            deadline = _monotonic() + timeout
        while True:
            micros = -1 if timeout < 0 else <long long>(timeout * 1e6)
            with nogil:
                status = PyThread_acquire_lock_timed(self._sem, micros, 1)
            if status == PY_LOCK_ACQUIRED:
                self._locked = True
                return True
            if status == PY_LOCK_INTR:
                # A signal arrived: run its handler (it may raise).
                PyErr_CheckSignals()
            if timeout > 0:
                timeout = deadline - _monotonic()
                if timeout <= 0:
                    return False

    cdef inline int _release(self) except -1:
        if not self._locked:
            raise RuntimeError("release unlocked lock")
        self._locked = False
        PyThread_release_lock(self._sem)
        return 0

"""
    + s[b:]
)
s = s.replace("    WAIT_LOCK,\n", "    NOWAIT_LOCK,\n")
open(p, "w").write(s)
