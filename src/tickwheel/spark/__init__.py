"""Event-time replay of ``acks=all`` produce logs on Spark (the ``[spark]`` extra).

``tickwheel.spark.resolve(events_df)`` replays a log of produce and follower
fetch events through tickwheel's purgatory (one MockTimer-driven
:class:`~tickwheel.purgatory.DelayedOperationPurgatory` of
:class:`~tickwheel.kafka.DelayedProduce` per topic-partition) and returns
each request's outcome.  The engine itself (:mod:`tickwheel.spark.engine`)
needs only pyarrow and numpy; pyspark is imported the first time a Spark
function is used, and ``import tickwheel`` never imports this package.

Names: :func:`resolve`, :func:`resolve_all`, :func:`spark_session` (Spark);
:func:`resolve_batches`, :func:`replay_table` (engine);
:func:`generate_trace`, :func:`write_trace` (synthetic traces);
:func:`run_replay` (the job behind ``tickwheel replay``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "generate_trace",
    "replay_table",
    "resolve",
    "resolve_all",
    "resolve_batches",
    "run_replay",
    "spark_session",
    "write_trace",
]

_WHERE = {
    "resolve": "._glue",
    "resolve_all": "._glue",
    "spark_session": "._glue",
    "resolve_batches": ".engine",
    "replay_table": ".engine",
    "generate_trace": ".trace",
    "write_trace": ".trace",
    "run_replay": ".job",
}

if TYPE_CHECKING:
    from ._glue import resolve, resolve_all, spark_session
    from .engine import replay_table, resolve_batches
    from .job import run_replay
    from .trace import generate_trace, write_trace


def __getattr__(name: str) -> Any:
    # PEP 562: import pyspark (via _glue) only when a Spark name is used.
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'tickwheel.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
