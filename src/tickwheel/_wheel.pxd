# Hierarchical timing wheel (Kafka's kafka.utils.timer), compiled core.
#
# Picture, tick_ms=1, wheel_size=20 (Kafka's defaults):
#
#   level 0: 20 buckets x 1 ms      covers [now, now + 20 ms)
#   level 1: 20 buckets x 20 ms     covers [now, now + 400 ms)   (created on demand)
#   level 2: 20 buckets x 400 ms    covers [now, now + 8 s)      (created on demand)
#   ...
#
# A bucket (TimerTaskList) is a circular doubly-linked list whose sentinel is
# the bucket itself (its _tail and _head are an entry's _prev and _next).
# Worked example: at time 1000 a task due at 1347 is too far for level 0
# (1000 + 20), so it goes to level 1, bucket (1347 // 20) % 20 = 7, whose slot
# starts at 1340.  The bucket, not the task, is queued in the DelayQueue at
# 1340.  When the clock reaches 1340 the driver polls that bucket, advances
# every level to 1340 and re-adds its tasks: 1347 now fits level 0 (bucket 7
# of slot 1347).  At 1347 it is polled again and the task is refused by the
# wheel ("already due"), so the driver runs it.
#
# Costs: add O(levels); cancel O(1) (unlink); the queue holds buckets, at
# most levels x wheel_size of them, so the driver wakes once per due slot.
#
# Thread-safety contract (the lock protocol).  TimerTaskList, DelayQueue and
# TimingWheel are not thread-safe by themselves: TimerCore (and TimerTask's
# cancel/postpone) guard them.  Every mutation here is C code that runs no
# Python code half-way (allocation happens before links are touched; user
# objects are released only after the structure is consistent).
#
# * GIL builds: the GIL serialises TimerCore, TimerTask.cancel/postpone and
#   the runner; the locks below compile to nothing (_ftlock.h), so a GIL
#   build runs exactly the instructions it ran before they existed.
# * Free-threaded builds (Py_GIL_DISABLED): one PyMutex per timer,
#   ``TaskCounter._mu`` (the counter is shared by every bucket, wheel level
#   and the expired list of one TimerCore, so a task finds its timer's lock
#   through ``task._list._counter``).  It guards, for that timer: every
#   bucket's ring and size, the DelayQueue heap, the wheels' clocks and
#   overflow levels, the counter, ``_ready``, the precascade cursor, the
#   manual clock, and the state and ``_list``/``_expiration_ms`` of every
#   task linked in or expired by it.
#   - Writers of a task's ``_state``/``_list`` hold its timer's lock, with one
#     exception: a RUNNING task becomes DONE under the lock too, and a task
#     whose ``_list`` is None (idle, running, done, cancelled) belongs to no
#     timer, so cancel() on it reads its state without a lock (it answers
#     False; a concurrent add() is ordered after that cancel).
#   - Fields read without the lock are accessed atomically (_ftlock.h
#     tw_load_*/tw_store_*, plain with a GIL): ``_list`` (written only by
#     _set_list), ``_state`` (its unlocked readers use _state_of) and the
#     manual clock; ThreadSanitizer: docs/reliability.md.
#   - A task's lock is found by reading ``task._list`` (unlocked), locking
#     ``_list._counter._mu`` and checking ``task._list`` again: a task only
#     moves between buckets of one timer under that lock, so a changed
#     ``_list`` means retry (Kafka's TimerTaskEntry.remove loop).  Buckets
#     live as long as their timer, so the unlocked read never sees a freed one;
#     the bucket found this way is used as a borrowed pointer (no reference
#     count traffic on an object every thread of the timer touches).  So a
#     timer must outlive the cancel()/postpone() calls other threads make on
#     its tasks: close() it before dropping it (docs/freethreading.md).  (A
#     bucket linked by hand, which no timer owns, is referenced for the call.)
#   - Under the lock no Python code runs: no user callable, no __del__ (a
#     cancelled or finished task's callable is released after unlocking),
#     no _on_wake hook.  So the lock is never taken twice by one thread and
#     never held while waiting for another lock (the purgatory's order is:
#     operation lock, then the timer lock; never the reverse).
#   - Tasks run outside the lock: the runner takes it per task only for the
#     EXPIRED -> RUNNING and RUNNING -> DONE transitions.
#   - The count (``TaskCounter.value``) changes only under the lock, by
#     atomic adds (tw_atomic_add_ssize), so ``len(timer)`` reads it with an
#     atomic load and no lock, like Kafka's ``timer.size``: the purgatory
#     reads it on every watch.
#   Kafka's finer shape (a lock per bucket, a read-write lock keeping the
#   add path apart from the advance path) is not used: tickwheel's add is a
#   few hundred instructions, shorter than the extra lock round trips, and
#   timers are independent, so threads on different timers never contend
#   (docs/freethreading.md has the measurements).
#
# Lanes (TimerCore._use_lanes; SystemTimer on free-threaded builds).  Even
# uncontended, one lock per timer makes threads that share a timer hand its
# lock, bucket and neighbouring tasks' cache lines back and forth on every
# add and cancel.  A laned timer is n cores in one: lane 0 is the TimerCore
# itself, lanes 1..n-1 are _Lane cores (``_lanes``, fixed once made), each
# with its own counter, lock, wheel, queue, expired list and ready list.
#   - Which lane.  schedule/schedule_as/_loop_call_* make the task, so no
#     other thread can reach it: it goes to the calling thread's lane
#     (tw_thread_lane: threads numbered as they first ask, lane = number %
#     n).  add(task) of a task pending or expired in one of the lanes moves
#     it within that lane (found by its bucket's counter, under that lane's
#     lock, re-checked).  A task in no lane goes to the calling thread's
#     lane too, but only while add() holds the task's ``_claim`` byte (an
#     atomic compare-and-swap 0 -> 1, released after the lane's unlock) and
#     finds it still in no bucket under the lane's lock: taking a task into
#     a lane is the one move no lane's lock covers, and the claim makes two
#     threads adding one task take turns.  A task never moves between lanes
#     while pending or expired; once it is in no bucket (running, done,
#     cancelled) an add may place it anew.  _add_guarded does this for
#     every add() on a free-threaded build, laned or not: a task in another
#     timer's bucket is looked at under that timer's lock (_lock_task) and
#     refused, and the claim keeps two timers from taking one idle task at
#     once (with one lock per timer, nothing else orders them).
#   - Each lane keeps the one-timer protocol above: its lock guards its
#     structures and its tasks; cancel()/postpone() find the lane through
#     ``task._list._counter`` as before; a lane's _on_wake goes to the timer.
#   - Visiting every lane (len sums the counts; next_expiration_ms,
#     next_precascade_ms, _take_due, _take_ready, precascade, cancel_all,
#     close, _check): one lane's lock at a time, never two.  _take_due
#     merges the lanes' tasks by expiration with a stable sort, so each
#     lane's own order holds and the merge is in expiration order to the
#     tick, as one timer's.  close() marks every lane closed, then cancels.
#   - The runner takes, per task, the lock of the lane the task expired in
#     (_lock_task).  A task its callable re-added may sit in another lane by
#     the time it finishes: RUNNING -> DONE then reads the state atomically
#     (only the runner moves a task out of RUNNING) and leaves it alone.
#   - A manual clock has one lane (MockTimer is driven by one thread).
#
# Memory: a pending TimerTask is one object of 80 bytes (no GC header: the
# node types are @no_gc and break their rings explicitly).  No cdef methods
# live on the node classes, so they carry no vtable pointer.

from libc.stdint cimport int64_t, uint64_t

from cpython.object cimport PyObject
cimport cython


# Real locks on free-threaded builds, nothing with a GIL (see above).
cdef extern from "_ftlock.h":
    ctypedef struct tw_mutex:
        pass
    ctypedef struct tw_line_pad:
        pass
    bint TW_FT_LOCKS
    void tw_lock(tw_mutex *m) noexcept nogil
    void tw_unlock(tw_mutex *m) noexcept nogil
    void tw_atomic_add_ssize(Py_ssize_t *p, Py_ssize_t v) noexcept nogil
    Py_ssize_t tw_atomic_load_ssize(Py_ssize_t *p) noexcept nogil
    void tw_atomic_store_ssize(Py_ssize_t *p, Py_ssize_t v) noexcept nogil
    void *tw_load_ptr(void **pp) noexcept nogil
    void tw_store_ptr(void **pp, void *v) noexcept nogil
    unsigned char tw_load_u8(unsigned char *p) noexcept nogil
    void tw_store_u8(unsigned char *p, unsigned char v) noexcept nogil
    unsigned long tw_load_ul(unsigned long *p) noexcept nogil
    void tw_store_ul(unsigned long *p, unsigned long v) noexcept nogil
    int64_t tw_load_i64(int64_t *p) noexcept nogil
    void tw_store_i64(int64_t *p, int64_t v) noexcept nogil
    Py_ssize_t tw_thread_lane() noexcept nogil
    bint tw_cas_u8(unsigned char *p, unsigned char expected, unsigned char desired) noexcept nogil
    void tw_cpu_pause() noexcept nogil


@cython.final
@cython.no_gc
cdef class TaskCounter:
    cdef public Py_ssize_t value
    # weakref.ref to the TimerCore that made it (None otherwise), so that
    # TimerTask.postpone() finds a pending task's timer through its bucket.
    cdef object _owner
    # The timer's lock (free-threaded builds; an unused byte with a GIL),
    # on a cache line of its own (free-threaded builds): a thread waiting
    # for it spins reading that line, so any field the holder writes there
    # (the count above, the reference count) would cost the holder a cache
    # miss per write (docs/freethreading.md).
    cdef tw_line_pad _pad_before_mu
    cdef tw_mutex _mu
    cdef tw_line_pad _pad_after_mu


@cython.no_gc
cdef class TimerTaskEntry:
    cdef int64_t _expiration_ms
    # Ring links, borrowed (NULL while unlinked): a linked entry is owned by
    # its bucket, which takes one reference in _link and drops it in _unlink,
    # so a link or unlink moves no reference count but the entry's own.
    cdef PyObject *_prev
    cdef PyObject *_next
    # Written under the timer's lock, read without it by _lock_list: stored
    # and loaded atomically (_set_list/_list_of in _wheel.pyx).
    cdef TimerTaskList _list


@cython.no_gc
cdef class TimerTask(TimerTaskEntry):
    cdef object _fn
    cdef tuple _args
    cdef double _delay_ms
    cdef unsigned char _state
    cdef unsigned char _spent         # callable released: cannot be re-added
    cdef unsigned char _delay_is_int  # delay_ms reads back as int
    # add() on a laned timer holds this (1) while it places a task that is
    # in no lane, so two threads never place one task at once ("Lanes").
    cdef unsigned char _claim
    # How far the exact deadline (clock ns) of the last add lies before
    # expiration_ms, clamped to 32 bits: deadline_ns = expiration_ms * 10**6
    # - _early_ns.  It fills the padding after the flags (the node stays 80
    # bytes), so a driver can order one tick's tasks by exact deadline.
    cdef unsigned int _early_ns


# A handle of tickwheel's asyncio loop (the base of _asyncio_wheel's
# TimerHandle).  asyncio's ``call_at(t).when()`` returns ``t`` itself, and a
# deadline in ns cannot give back every float: the handle keeps ``t`` (8
# bytes; docs/dropins.md, "Where it differs from asyncio").
cdef class _LoopHandle(TimerTask):
    cdef public double _when_s  # call_at's ``when``; read only while it is the deadline


# Validate a delay in ms, store it on ``task`` (as the delay_ms setter does)
# and return it in ns; the compiled purgatory makes its operations with it.
cdef int64_t _delay_to_ns(object delay_ms, TimerTask task=*) except? -1


@cython.final
@cython.no_gc
cdef class TimerTaskList:
    # The ring's sentinel is the bucket itself: _tail and _head sit where a
    # TimerTaskEntry keeps _prev and _next (after the vtable pointer, where
    # an entry keeps _expiration_ms), so an entry links to its bucket as to
    # any entry, and linking at the tail reads no separate root object.
    # _wheel.pyx checks the layout at compile time (TW_BUCKET_RING_CHECK).
    cdef PyObject *_tail
    cdef PyObject *_head
    cdef TaskCounter _counter
    cdef int64_t _expiration_ms
    cdef int64_t _seq
    cdef Py_ssize_t _size
    cdef bint _has_expiration

    cdef void _link(self, TimerTaskEntry entry) noexcept
    cdef void _unlink(self, TimerTaskEntry entry) noexcept
    cdef PyObject **_detach(self) except NULL
    cdef void _clear(self) noexcept
    cdef bint _set_expiration(self, int64_t expiration_ms) noexcept


@cython.final
@cython.no_gc
cdef class DelayQueue:
    cdef list _heap
    cdef int64_t _seq

    cdef bint _offer(self, TimerTaskList bucket) except -1
    cdef TimerTaskList _pop(self)


@cython.final
@cython.no_gc
cdef class TimingWheel:
    cdef int64_t _tick_ms
    cdef int64_t _wheel_size
    cdef int64_t _interval_ms
    cdef int64_t _current_time_ms
    cdef int64_t _current_index     # (current_time_ms // tick_ms) % wheel_size
    # ceil(2**64 / tick_ms): offset // tick_ms as one multiplication for an
    # offset below 2**32 (_wheel_link; _compat.h's tw_div_by_recip).
    cdef uint64_t _tick_recip
    cdef list _buckets
    cdef TimingWheel _overflow
    cdef TaskCounter _counter
    cdef DelayQueue _queue

    cdef bint _add(self, TimerTaskEntry entry) except -1
    cdef void _advance(self, int64_t time_ms) noexcept
    cdef Py_ssize_t _linked(self) noexcept


# Levels _level_link keeps in its table (a timer with more uses _wheel_link
# above them).
cdef enum:
    TW_LEVELS = 12


cdef class TimerCore:
    cdef object __weakref__
    cdef object _clock
    cdef bint _fast_clock
    cdef bint _manual
    cdef bint _closed
    cdef int64_t _manual_now_ns
    cdef int64_t _tick_ms
    cdef TaskCounter _counter
    cdef DelayQueue _queue
    cdef TimingWheel _wheel
    cdef TimerTaskList _expired
    cdef list _ready
    # precascade(): the overflow bucket being moved down early, its slot,
    # entries left in the current pass, and the lower level's horizon when
    # the pass began (-1: no pass yet).
    cdef TimerTaskList _pc_bucket
    cdef int64_t _pc_expiration
    cdef Py_ssize_t _pc_left
    cdef int64_t _pc_horizon
    # Lanes (see "Lanes" above): None, or after _use_lanes(n) a tuple of n
    # cores, [0] None (this core is lane 0), the others _Lane instances.
    cdef tuple _lanes
    cdef Py_ssize_t _nlanes
    # schedule()'s millisecond: the last C clock reading it saw, rounded up
    # to the ms (_ms_ceil) and back in ns (_ms_ceil_ns; INT64_MIN until the
    # first reading).  See _ceil_now_ms (_wheel_place.pxi).
    cdef int64_t _ms_ceil
    cdef int64_t _ms_ceil_ns
    # The timer reads the C clock (not manual, no Python clock), its tick
    # is 1 ms and the build has a GIL: the cached millisecond may be used.
    cdef bint _ms_clock
    # schedule()'s copy of the level chain (_level_link): the first _nlevels
    # levels (borrowed: each is owned by the one below it, the first by
    # _wheel, and a level is never removed) and their bucket arrays (the
    # items of each level's _buckets, a list never resized).
    cdef int _nlevels
    cdef PyObject *_levels[TW_LEVELS]
    cdef PyObject **_level_buckets[TW_LEVELS]

    cdef int64_t _now_ns(self) except? -1

# TimerCore.add (after its type check), len(timer) and TimerTask.cancel()
# as C calls: the compiled purgatory's timer path, without attribute lookups.
cdef int _timer_add(TimerCore self, TimerTask t) except -1
cdef Py_ssize_t _timer_len(TimerCore self) noexcept
cdef object _cancel_task(TimerTask task)
