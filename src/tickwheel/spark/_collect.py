"""``DataFrame.collect()`` without pyspark 4.0/4.1's socket warning.

Before 4.2, pyspark's ``collect()`` reads the rows from a local socket that
it never closes (it leaves it to the garbage collector, "The socket will be
automatically closed when garbage-collected" in ``pyspark/util.py``), so
every call emits ``ResourceWarning: unclosed <socket.socket ...>``:
printed under ``python -X dev`` or ``-W default``, an error under
``-W error``.  SPARK-54247 (apache/spark#53200, in 4.2.0) closes it.  The
``[spark]`` extra still accepts 4.0 and 4.1, so with them :func:`collect`
silences that one warning around the call, where the socket is dropped
(CPython frees it as the rows are returned); newer pyspark calls
``collect()`` as is.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any


@functools.cache
def leaves_socket_open() -> bool:
    """True if the installed pyspark predates SPARK-54247 (4.2.0)."""
    import pyspark

    major, minor = (int(p) for p in pyspark.__version__.split(".")[:2])
    return (major, minor) < (4, 2)


def collect(df: Any) -> list[Any]:
    """``df.collect()``, without pyspark < 4.2's unclosed-socket warning."""
    if not leaves_socket_open():
        return list(df.collect())
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"unclosed <socket\.socket", ResourceWarning)
        return list(df.collect())
