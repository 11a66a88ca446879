# The hot half of Kafka's DelayedProduce, compiled (see _kafka_py.py, its
# pure-Python twin, for the worked example; kafka.py for the model).
#
# Layering: this module cimports the purgatory (_ProduceCore extends its
# DelayedOperation, _new_produce uses its _fresh); the purgatory knows
# nothing of Kafka's replication model.  The replay loop
# (spark/_replay.pyx) cimports this module to fill operations in C.
#
#   _PartitionCore   Partition's smallest in-sync follower LEO (kept up to
#                    date by kafka.Partition, written in C by the replay loop)
#   _ProduceCore     DelayedProduce's fields and its two hooks; kafka.py
#                    subclasses it for validation and the rest
#
# Costs: try_complete is one comparison of C-held objects; _new_produce is
# one allocation plus ten field stores.  Not thread-safe by itself: the
# purgatory calls the hooks under the operation's lock.
#
# Binary coupling: _ProduceCore extends _purgatory.DelayedOperation's C
# struct; the module checks the size at import and refuses a stale build.

from tickwheel._purgatory cimport DelayedOperation


cdef class _PartitionCore:
    # Read and written under the object's critical section (free-threaded
    # builds: a request thread reads it while a follower thread replaces it;
    # nothing with a GIL): the _acked_to property.
    cdef object _acked


cdef class _ProduceCore(DelayedOperation):
    cdef public object partition
    cdef public object required_offset
    cdef public object timeout_ms
    cdef public object arrival_ms
    cdef public object done_ms
    cdef public object outcome
    cdef public object error
    cdef public object request_id
    cdef public object _clock
    cdef public object _callback
    cpdef try_complete(self)
    cpdef on_complete(self)
    cdef object _try_c(self)
    cdef object _complete_c(self)


# _new_operation plus the produce fields, in one C call (the replay loop);
# cpdef so Python code (and the parity test) sees the same name as the twin's.
cpdef _ProduceCore _new_produce(
    type cls, object partition, object required_offset, object timeout_ms,
    object arrival_ms, object request_id, object clock, object callback)
