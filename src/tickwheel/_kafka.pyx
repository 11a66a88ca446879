# cython: freethreading_compatible=True
"""Compiled hot half of Kafka's DelayedProduce (see ``_kafka.pxd``).

``_kafka_py.py`` is the pure-Python twin and reference: the same names,
signatures and docstrings, and the same logic line for line.
"""

cimport cython
from tickwheel._purgatory cimport DelayedOperation, _force_complete, _fresh
from tickwheel._wheel cimport tw_load_u8

from tickwheel._purgatory import DelayedOperation as _DelayedOperation

__all__ = ["COMPLETED", "EXPIRED", "REQUEST_TIMED_OUT"]

COMPLETED = "completed"
EXPIRED = "expired"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"

# _ProduceCore's fields follow DelayedOperation's in one C struct: a
# _purgatory built from another _purgatory.pxd would overlap them.
if _DelayedOperation.__basicsize__ != sizeof(DelayedOperation):
    raise ImportError(
        "tickwheel._kafka was built against another tickwheel._purgatory "
        f"(DelayedOperation is {_DelayedOperation.__basicsize__} bytes, expected "
        f"{sizeof(DelayedOperation)}): rebuild the extensions together"
    )


# Each class docstring (and __init__ docstring) opens with the constructor's
# signature and a "--" line: CPython serves that as __text_signature__
# (inspect.signature, help(), IDEs) and leaves it out of __doc__.
cdef class _PartitionCore:
    """_PartitionCore()
--

    The one field of Partition that DelayedProduce.try_complete reads."""

    @property
    def _acked_to(self):
        with cython.critical_section(self):
            return self._acked

    @_acked_to.setter
    def _acked_to(self, value):
        with cython.critical_section(self):
            self._acked = value


cdef class _ProduceCore(DelayedOperation):
    """_ProduceCore(delay_ms, lock=None)
--

    The fields and hot methods of DelayedProduce (kafka.py adds the rest)."""

    cpdef try_complete(self):
        """Complete iff every in-sync follower's LEO reached required_offset."""
        return self._try_c()

    cpdef on_complete(self):
        """Record the outcome and completion time, then call the callback."""
        return self._complete_c()

    # The bodies (DelayedOperation's C virtual methods, which the purgatory
    # calls directly when no Python class overrides the hook).
    cdef object _try_c(self):
        partition = self.partition
        if isinstance(partition, _PartitionCore):
            # Partition's field, read in C: one comparison.
            with cython.critical_section(partition):
                acked = (<_PartitionCore>partition)._acked
            if acked < self.required_offset:
                return False
        elif not partition.acked(self.required_offset):
            return False
        return _force_complete(self)

    cdef object _complete_c(self):
        self.done_ms = self._clock()
        if tw_load_u8(&self._expired):
            self.outcome = EXPIRED
            self.error = REQUEST_TIMED_OUT
        else:
            self.outcome = COMPLETED
        if self._callback is not None:
            self._callback(self)
        return None


cpdef _ProduceCore _new_produce(
    type cls, object partition, object required_offset, object timeout_ms,
    object arrival_ms, object request_id, object clock, object callback
):
    """A new ``cls`` (a _ProduceCore subclass) with every field set, without __init__.

    The caller has validated every value (the replay loop, which creates one
    per request); ``done_ms``, ``outcome`` and ``error`` start as None.

    :raises TypeError: if ``cls`` is not a _ProduceCore subclass
    """
    # The checked cast raises TypeError for a cls that is no _ProduceCore.
    cdef _ProduceCore op = <_ProduceCore?>_fresh(cls, timeout_ms)
    op.partition = partition
    op.required_offset = required_offset
    op.timeout_ms = timeout_ms
    op.arrival_ms = arrival_ms
    op.request_id = request_id
    op._clock = clock
    op._callback = callback
    return op
