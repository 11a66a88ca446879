"""Spark Connect: the replay from a thin client (``tickwheel replay --remote sc://...``).

Why: Spark 4 reaches shared clusters through Spark Connect; the client has
no JVM and no ``SparkContext``, only a gRPC channel to a server that plans
and runs the job.  The replay's DataFrame code is the same on both kinds of
session; what differs is what the classic path does through the driver's
JVM, which a Connect client does not have:

* the default number of replay partitions (classic: twice
  ``defaultParallelism``; Connect: ``spark.sql.shuffle.partitions``, which
  :func:`connect_session` sets to twice this machine's cores unless given);
* moving and deleting the staging files (classic: Hadoop's FileSystem in the
  JVM; Connect: this process's own file system, so OUTPUT must be a local
  path that the server writes too: the same machine, or a shared mount).

:func:`is_connect` tells the two apart for a session or a DataFrame.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
from typing import Any

from .validate import ReplayUsageError, is_url

__all__ = [
    "check_remote",
    "connect_session",
    "default_parallelism",
    "is_connect",
    "local_delete",
]


def is_connect(obj: Any) -> bool:
    """Whether ``obj`` (a SparkSession or a DataFrame) belongs to Spark Connect."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: Any) -> int:
    """Tasks Spark runs at once by default (Connect: the shuffle partitions)."""
    if is_connect(spark):
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")) // 2)
    return int(spark.sparkContext.defaultParallelism)


def check_remote(url: str, output: str, timeout_s: float = 2.0) -> None:
    """``--remote`` is ``sc://HOST:PORT[/;params]`` that answers; OUTPUT is local.

    :raises ReplayUsageError: with one line saying what is wrong
    """
    if not url.startswith("sc://"):
        raise ReplayUsageError(
            f"--remote {url!r} is not a Spark Connect URL: use sc://HOST:PORT"
        )
    hostport = url[len("sc://") :].split("/", 1)[0].split(";", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host:
        host, port = hostport, "15002"
    if not port.isdigit():
        raise ReplayUsageError(f"--remote {url!r}: expected sc://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise ReplayUsageError(
            f"--remote {url!r}: cannot reach the Spark Connect server ({reason}); "
            "is it running?"
        ) from None
    if is_url(output):
        raise ReplayUsageError(
            f"OUTPUT {output!r}: with --remote, give a local path that the "
            "Connect server writes too (the same machine or a shared mount)"
        )
    missing = _missing_connect_client()
    if missing:
        raise ReplayUsageError(
            f"--remote needs Spark Connect's client, and {missing} is not "
            "installed: pip install 'pyspark[connect]'"
        )


def _missing_connect_client() -> str | None:
    """The first module of ``pyspark[connect]``'s client that is not installed.

    The ``spark`` extra leaves them out on CPython 3.15, where zstandard has
    no wheel (pyproject.toml).
    """
    for module in ("grpc", "grpc_status", "google.protobuf", "zstandard"):
        if importlib.util.find_spec(module) is None:
            return module
    return None


def connect_session(url: str, conf: dict[str, str] | None = None) -> Any:
    """A Spark Connect session to ``url`` with the replay's runtime settings.

    Only runtime (SQL) settings can be set from a client; the cluster's own
    settings (memory, executors' Python) are the server's.
    """
    from pyspark.sql import SparkSession

    settings = {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
        "spark.sql.shuffle.partitions": str(2 * (os.cpu_count() or 2)),
        **(conf or {}),
    }
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in settings.items():
        spark.conf.set(key, value)
    return spark


def local_delete(path: str) -> None:
    """Delete a local directory tree (or file) if it exists."""
    path = path[len("file:") :] if path.startswith("file:") else path
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
