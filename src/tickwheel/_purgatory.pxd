# Kafka's request purgatory, compiled hot paths (see purgatory.py for the
# design and the worked example, _purgatory_py.py for the pure-Python twin
# and reference of every name here).  Generic: it knows operations, keys and
# locks, nothing of what an operation waits for (Kafka's produce lives in
# _kafka.pxd, which cimports this file).
#
# What is compiled, and why: a typical operation goes through
# try_complete_else_watch once and check_and_complete a few times, and each
# pass reads and writes a handful of flags under the operation's lock.  As
# Python attributes those reads are dictionary-free slot lookups but still
# cost a bytecode dispatch each; here they are C fields of the operation.
#
#   DelayedOperation(TimerTask)   the operation is its own timer node; adds
#                                 its lock, the holder's thread id and six flags
#   _Shard                        one slice of the key space: lock + dict
#   _PurgatoryCore                the two hot methods of DelayedOperationPurgatory
#                                 (purgatory.py subclasses it for the rest)
#
# Costs are those of purgatory.py: watch O(keys + timer levels), check
# O(operations watching the key), completion O(1).  The hooks (try_complete,
# on_complete, on_expiration) and force_complete are cpdef: called in C when
# the operation's class does not override them in Python, through the
# attribute when it does (Cython checks on every call, cached by the type's
# dictionary version), so subclasses override them as usual.
#
# Thread-safety: exactly purgatory.py's protocol (per-operation lock, the
# retry flag hand-off, shard locks for writers, lists replaced not edited
# while a scan may read them; with a GIL, edited in place when none does).
# The locks are _Lock objects (or the lock the user passed), real locks on
# free-threaded builds.  An operation's flags are written under its lock and
# some are read without it (the done checks, the retry hand-off: Kafka's
# AtomicBooleans), so every access to them is an atomic load or store
# (_ftlock.h; plain with a GIL).  The hand-off needs no stronger order: the
# flag's store and the lock holder's load after its release are ordered by
# the _Lock's own mutex, which both take.
#
# Binary coupling: DelayedOperation extends _wheel.TimerTask's C struct, so
# this module must be rebuilt whenever _wheel.pxd changes TimerTask's
# fields; the module checks the size at import and refuses a stale build.

from tickwheel._wheel cimport TimerTask, _delay_to_ns


cdef class DelayedOperation(TimerTask):
    # The operation's lock: an object (a given lock, or a _Lock), or, for a
    # private lock on a GIL build, None while _oplocked serves as the lock
    # (_purgatory_lock.pxi, "the operations' private lock").
    cdef object _oplock
    cdef unsigned char _oplocked
    # The flags: written under the operation's lock, some read without it
    # (the retry hand-off, the done checks), so every access is an atomic
    # tw_load_*/tw_store_* (plain with a GIL).  Python reads them as the
    # twin's _op_holder, _op_done, ... (read-only properties).
    cdef unsigned long _holder
    cdef unsigned char _done
    cdef unsigned char _withdrawn
    cdef unsigned char _expired
    cdef unsigned char _submitted
    cdef unsigned char _retry
    cdef unsigned char _trylock
    # The hooks and force_complete: cpdef, so the purgatory's calls skip the
    # attribute lookup when the subclass does not override them in Python.
    cpdef try_complete(self)
    cpdef on_complete(self)
    cpdef on_expiration(self)
    cpdef force_complete(self)
    # The hooks' bodies (the cpdef hooks call them): a compiled subclass
    # overrides these (keeping the cpdef hook, which delegates, for its
    # docstring), and the purgatory calls them without Cython's per-call
    # check for a Python override (_purgatory.pyx, "calling the hooks").
    cdef object _try_c(self)
    cdef object _complete_c(self)
    cdef object _expire_c(self)


# An operation that completes when its countdown reaches zero, its test a
# C comparison (no Python frame per try), its on_complete a callback.
cdef class CountdownOperation(DelayedOperation):
    # Counted down under the object's critical section, every access atomic
    # (the purgatory's scan reads it without the critical section).
    cdef Py_ssize_t _count
    cdef object _callback
    cpdef try_complete(self)
    cpdef on_complete(self)
    cdef object _try_c(self)
    cdef object _complete_c(self)


cdef class _Shard:
    cdef public object lock
    cdef public dict watchers


cdef class _PurgatoryCore:
    cdef public str _name
    cdef public object _timer
    cdef public Py_ssize_t _purge_interval
    cdef public list _shards
    cdef public Py_ssize_t _mask
    cdef Py_ssize_t _n_estimated  # the _estimated property: atomic access
    cdef public bint _shut
    cdef public set _op_types
    # The type last found in _op_types (None at first): most purgatories
    # watch one operation type, so the set lookup is skipped (GIL builds).
    cdef object _last_op_type
    # True when the timer's class keeps TimerCore's add and __len__: the
    # watch then calls them in C (set by the purgatory's __init__).
    cdef public bint _c_timer
    # Check scans in progress (GIL builds; read and written with the GIL
    # held): while none but the caller's runs, a compaction may edit a
    # watcher list in place instead of replacing it.
    cdef Py_ssize_t _scans


# A new operation of class ``cls`` with ``delay_ms`` and a private lock, its
# __init__ not called (_new_operation; _kafka._new_produce builds on it).
cdef DelayedOperation _fresh(type cls, object delay_ms)

# op.force_complete() for a compiled hook body: DelayedOperation's own body
# unless a Python class overrides it (then the override, as Cython would).
cdef object _force_complete(DelayedOperation op)
