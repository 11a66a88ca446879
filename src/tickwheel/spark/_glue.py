"""Spark glue: run the replay engine inside ``mapInArrow`` (imports pyspark).

Why this shape: the engine needs each partition's events *in order*.  Spark
does not guarantee row order inside ``groupBy().applyInPandas``/``applyInArrow``
groups, but ``repartition(n, "partition").sortWithinPartitions(...)`` puts all
of a topic-partition's rows in one Spark partition, sorted, and
``mapInArrow`` hands that partition to the engine as a stream of Arrow
batches in exactly that order.

The sort is by ``(ts_ms, kind)`` only, and the engine groups the rows by
topic-partition itself (``sorted_by="time"``, a stable numpy sort of the
task's rows).  Sorting by ``(partition, ts_ms, kind)`` in Spark costs more:
its sort compares an 8-byte key prefix first, and with the partition name
first that prefix ties for nearly every pair of rows, so nearly every
comparison falls through to a full row comparison; with ``ts_ms`` first the
prefix decides almost all of them (measured: 0.45 s of the replay's 7 s at
a million requests on ``local[2]``).  The price is memory: each task holds
its rows whole (a topic-partition never spans two tasks either way).

The engine emits one tagged-union schema; :func:`resolve_all` caches it once
and splits it into the three outputs, so the replay runs once however many
outputs are written.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from ._collect import collect
from ._engine_checks import _check_lag, normalize_timeouts
from ._engine_output import unpack_ids
from ._engine_schemas import INPUT_COLUMNS, OUTPUT_SCHEMA, RECORD_SCHEMAS
from ._remote import default_parallelism, is_connect, local_delete
from .engine import resolve_batches

_ARROW_TO_SPARK: dict[pa.DataType, DataType] = {
    pa.int64(): LongType(),
    pa.int32(): IntegerType(),
    pa.string(): StringType(),
    pa.bool_(): BooleanType(),
    pa.binary(): BinaryType(),
}


def _spark_type(dtype: pa.DataType) -> DataType:
    if pa.types.is_struct(dtype):
        return spark_schema(pa.schema(list(dtype)))
    return _ARROW_TO_SPARK[dtype]


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark StructType of an Arrow schema of int64/int32/string/bool/binary
    and structs of them."""
    return StructType(
        [StructField(f.name, _spark_type(f.type), nullable=True) for f in schema]
    )


OUTPUT_SPARK_SCHEMA = spark_schema(OUTPUT_SCHEMA)
INPUT_SPARK_TYPES = {name: _ARROW_TO_SPARK[t] for name, t in INPUT_COLUMNS.items()}


class ReplayFrames(NamedTuple):
    """The replay's outputs as DataFrames (all backed by one cached union)."""

    outcomes: DataFrame
    purgatory_size: DataFrame
    rejected: DataFrame
    meta: DataFrame
    union: DataFrame

    def unpersist(self) -> None:
        """Drop the cached union (call when done with the outputs)."""
        self.union.unpersist()


def spark_session(
    master: str = "local[*]",
    app_name: str = "tickwheel-replay",
    *,
    ui: bool = False,
    progress: bool = True,
    shuffle_partitions: int | None = None,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Build (or get) a SparkSession set up for the replay.

    For a ``local`` master, the Python workers run this interpreter
    (``PYSPARK_PYTHON``) and Spark binds to 127.0.0.1 (``SPARK_LOCAL_IP``),
    unless those are already set.  On a cluster the executors need tickwheel
    installed (see the README: installed wheel or a packed venv in
    ``spark.archives``).

    :param master: Spark master URL
    :param ui: start the Spark web UI
    :param progress: show Spark's console progress bar
    :param shuffle_partitions: ``spark.sql.shuffle.partitions`` (default: 2x cores)
    :param extra_conf: further Spark settings
    """
    if not isinstance(master, str) or not master:
        raise ValueError(f"master must be a Spark master URL, got {master!r}")
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.sql.adaptive.enabled", "true")
        # Larger Arrow batches to and from the engine: fewer per-batch costs on
        # both sides (measured: about 10% of the replay's CPU at 1M requests).
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
    )
    if shuffle_partitions is None:
        shuffle_partitions = 2 * (os.cpu_count() or 2)
    builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def conform_events(
    events: DataFrame, duplicates: str | Sequence[int] = "find"
) -> tuple[DataFrame, DataFrame]:
    """Cast the input columns to the binding types; split off malformed rows.

    A value that does not cast (``"abc"`` as ``ts_ms``) makes the row a
    ``rejected`` row with reason ``invalid <column>`` and the value's own
    text in ``raw``; every row of a request_id that occurs in two produce
    rows is rejected as ``duplicate request_id``.  Rows with a null
    partition or a null or unknown kind are rejected here too (same reasons,
    same order as the engine, which then receives ``kind`` as a code); the
    other checks (nulls, negative values) run in the engine, row by row.

    ``duplicates``: "find" runs one Spark job at once to find duplicated ids
    (the rest is lazy); a sequence of ids rejects exactly those; "skip" leaves
    duplicates to the caller (:func:`replay_to` finds them from the engine's
    own id lists, without that job).

    In named steps: :func:`_check_input_columns`, :func:`_flag_invalid`,
    :func:`_duplicate_ids`, :func:`_split_duplicates`, :func:`_kind_codes`.

    :return: (clean events with exactly the eight columns, ``kind`` as a
        tinyint code: 0 fetch, 1 produce; rejected rows: the input columns,
        ``reason`` and ``raw``)
    :raises ValueError: if a column is missing
    """
    _check_input_columns(events)
    # Evaluate the checks on the raw columns, then keep typed values.
    flagged = _flag_invalid(events)
    rejected_parts = [flagged.where(F.col("reason").isNotNull())]
    typed = flagged.where(F.col("reason").isNull()).drop("reason", "raw")
    clean, duplicated = _split_duplicates(typed, _duplicate_ids(typed, duplicates))
    if duplicated is not None:
        rejected_parts.append(duplicated)
    rejected = functools.reduce(DataFrame.unionByName, rejected_parts)
    return _kind_codes(clean), rejected


def _check_input_columns(events: DataFrame) -> None:
    """Raise ValueError naming the input columns ``events`` lacks."""
    missing = [c for c in INPUT_COLUMNS if c not in events.columns]
    if missing:
        raise ValueError(
            f"events are missing column(s) {missing}; the input schema is "
            f"{list(INPUT_COLUMNS)} (got {events.columns})"
        )


def _flag_invalid(events: DataFrame) -> DataFrame:
    """The input columns cast to their types, plus ``reason`` and ``raw``.

    ``reason`` is the first failed check (null: the row is fine); for a value
    that did not cast, ``raw`` keeps its text (the typed column is null).
    """
    dtypes = dict(events.dtypes)
    casts: list[Column] = []
    invalid: list[tuple[Column, str, Column | None]] = []
    for name, spark_type in INPUT_SPARK_TYPES.items():
        column = F.col(name)
        if dtypes[name] == spark_type.simpleString():
            casts.append(column)
            continue
        cast = column.try_cast(spark_type)
        casts.append(cast.alias(name))
        failed = column.isNotNull() & cast.isNull()
        invalid.append((failed, f"invalid {name}", column.cast("string")))
    # The engine's first three checks run here, in its order, so that the
    # engine can receive ``kind`` as a 0/1 code instead of a string.
    kind = F.col("kind")
    invalid += [
        (F.col("partition").isNull(), "null partition", None),
        (kind.isNull(), "null kind", None),
        (~kind.isin("fetch", "produce"), "unknown kind", None),
    ]
    reason: Column = F.lit(None).cast("string")
    raw: Column = F.lit(None).cast("string")
    for condition, text, value in reversed(invalid):  # the first check wins
        reason = F.when(condition, F.lit(text)).otherwise(reason)
        raw = F.when(condition, value if value is not None else F.lit(None)).otherwise(
            raw
        )
    return events.select(
        *casts, reason.alias("reason"), raw.cast("string").alias("raw")
    )


def _duplicate_ids(
    typed: DataFrame, duplicates: str | Sequence[int]
) -> DataFrame | None:
    """The duplicated produce request_ids (see :func:`conform_events`), or None.

    Found by one aggregation over two columns ("find"; nearly always none),
    so that the split below runs only when there are any: a join planned up
    front would shuffle every event by request_id just to find nothing.
    """
    if not isinstance(duplicates, str):
        spark = typed.sparkSession
        return spark.createDataFrame([(int(i),) for i in duplicates], "request_id long")
    if duplicates not in ("find", "skip"):
        raise ValueError(
            f"duplicates must be 'find', 'skip' or ids, got {duplicates!r}"
        )
    if duplicates == "skip":
        return None
    return (
        typed.where(_is_produce())
        .groupBy("request_id")
        .count()
        .where(F.col("count") > 1)
        .select("request_id")
        .localCheckpoint()
    )


def _is_produce() -> Column:
    return (F.col("kind") == "produce") & F.col("request_id").isNotNull()


def _split_duplicates(
    typed: DataFrame, dup_ids: DataFrame | None
) -> tuple[DataFrame, DataFrame | None]:
    """(rows to replay, rows rejected as ``duplicate request_id`` or None).

    A broadcast join with the (few) duplicated ids, only if there are any.
    """
    if dup_ids is None or dup_ids.isEmpty():
        return typed, None
    marked = typed.join(
        F.broadcast(dup_ids.withColumn("_dup", F.lit(True))), "request_id", "left"
    ).withColumn("_dup", F.coalesce(F.col("_dup") & _is_produce(), F.lit(False)))
    clean = marked.where(~F.col("_dup")).select(*INPUT_COLUMNS)
    rejected = (
        marked.where(F.col("_dup"))
        .select(*INPUT_COLUMNS)
        .withColumn("reason", F.lit("duplicate request_id"))
        .withColumn("raw", F.lit(None).cast("string"))
    )
    return clean, rejected


def _kind_codes(clean: DataFrame) -> DataFrame:
    """``kind`` as the engine's tinyint code: 0 fetch, 1 produce."""
    return clean.withColumn(
        "kind", F.when(F.col("kind") == "fetch", 0).otherwise(1).cast("tinyint")
    )


def _engine_task(
    timeouts: list[int | None] | None,
    lag_ms: int | None,
    report_ids: bool,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: one engine run over one sorted Spark partition."""
    settings: Any = None if timeouts == [None] else timeouts
    yield from resolve_batches(
        batches, settings, lag_ms, report_ids=report_ids, sorted_by="time"
    )


def resolve_all(
    events: DataFrame,
    timeout_ms: int | Sequence[int] | None = None,
    replica_lag_max_ms: int | None = None,
    *,
    num_partitions: int | None = None,
    validate: bool = True,
    persist: bool = True,
    duplicates: str | Sequence[int] = "find",
    report_ids: bool = False,
) -> ReplayFrames:
    """Replay ``events`` on Spark; return outcomes, purgatory_size, rejected and meta.

    The union behind the four DataFrames is persisted (memory and disk), so
    the engine runs once however many of them are used; call
    :meth:`ReplayFrames.unpersist` when done.

    :param events: the events table (columns as in the README; extra ones ignored)
    :param timeout_ms: None (each row's timeout), an int, or several ints
        (a sweep in one pass; outcomes then carry one row per request and timeout)
    :param replica_lag_max_ms: None for a fixed ISR, else the lag after which a
        follower leaves the ISR (it rejoins once caught up)
    :param num_partitions: Spark partitions for the replay (default: 2x the
        default parallelism); each topic-partition lands whole in one of them
    :param validate: cast and duplicate checks in Spark (turn off only for
        input known to be clean)
    :param persist: cache the union (False: each action on an output reruns
        the engine)
    :param duplicates: see :func:`conform_events`
    :param report_ids: engine meta records carry the replayed ids
    :raises TypeError, ValueError: for bad settings or missing columns
    """
    timeouts = normalize_timeouts(timeout_ms)
    lag_ms = _check_lag(replica_lag_max_ms)
    spark = events.sparkSession
    if num_partitions is None:
        num_partitions = 2 * default_parallelism(spark)
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int):
        raise TypeError(f"num_partitions must be an int, got {num_partitions!r}")
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions!r}")
    if validate:
        clean, rejected_early = conform_events(events, duplicates)
    else:
        clean = events.select(*INPUT_COLUMNS)
        rejected_early = None
    with warnings.catch_warnings():
        # PySpark 4.3 warns on pandas 3, which the spark extra takes on
        # CPython 3.15; mapInArrow passes Arrow batches and uses no pandas.
        warnings.filterwarnings(
            "ignore", "PySpark does not yet fully support pandas", FutureWarning
        )
        union = (
            clean.repartition(num_partitions, "partition")
            .sortWithinPartitions("ts_ms", "kind")
            .mapInArrow(
                functools.partial(_engine_task, timeouts, lag_ms, report_ids),
                OUTPUT_SPARK_SCHEMA,
            )
        )
    if rejected_early is not None:
        union = union.unionByName(_pack_rejected(rejected_early))
    if persist:
        union = union.persist(StorageLevel.MEMORY_AND_DISK)
    record = F.col("record")
    return ReplayFrames(
        outcomes=_named(union.where(record == "outcome"), "outcome"),
        purgatory_size=_named(union.where(record == "size"), "size"),
        rejected=_named(union.where(record == "rejected"), "rejected"),
        meta=_named(union.where(record == "meta"), "meta"),
        union=union,
    )


def _pack_rejected(rejected: DataFrame) -> DataFrame:
    """Rejected rows (input columns + reason) as union rows of record ``rejected``."""
    columns: list[Column] = []
    for field in OUTPUT_SPARK_SCHEMA.fields:
        if field.name == "record":
            value = F.lit("rejected")
        elif field.name == "rejected":
            assert isinstance(field.dataType, StructType)
            value = F.struct(
                *(
                    F.col(f.name).cast(f.dataType).alias(f.name)
                    for f in field.dataType.fields
                )
            )
        else:
            value = F.lit(None).cast(field.dataType)
        columns.append(value.alias(field.name))
    return rejected.select(*columns)


def _named(rows: DataFrame, record: str) -> DataFrame:
    """The union's rows of ``record`` with their named columns (RECORD_SCHEMAS)."""
    fields = RECORD_SCHEMAS[record].names
    if record == "outcome":
        return rows.select(*fields)
    if record == "meta":
        fields = [name for name in fields if name != "ids"]
    return rows.select(*(F.col(record)[name].alias(name) for name in fields))


def resolve(
    events_df: DataFrame,
    timeout_ms: int | Sequence[int] | None = None,
    replica_lag_max_ms: int | None = None,
) -> DataFrame:
    """Replay ``events_df`` on Spark and return the outcomes DataFrame.

    One row per request (and per timeout when ``timeout_ms`` is a sequence):
    ``request_id, partition, arrival_ms, deadline_ms, outcome, done_ms,
    latency_ms, timeout_ms``.  Malformed rows are left out of it: use
    :func:`resolve_all` to get them (``rejected``, with a reason) and the
    purgatory sizes.

    :param events_df: events with the input schema (see the README)
    :param timeout_ms: None (row timeouts), an int, or a sequence (sweep)
    :param replica_lag_max_ms: None (fixed ISR) or the ISR lag limit in ms
    """
    return resolve_all(
        events_df, timeout_ms, replica_lag_max_ms, persist=False
    ).outcomes


OUTPUT_DIRS = {"outcome": "outcomes", "size": "purgatory_size", "rejected": "rejected"}


def _delete_path(spark: SparkSession, path: str) -> None:
    """Recursively delete ``path`` on whatever filesystem Spark writes to."""
    if is_connect(spark):  # no JVM here: a local path (see _remote)
        return local_delete(path)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    hadoop_path.getFileSystem(conf).delete(hadoop_path, True)


#: Concurrent file writers per task for the staging write (there are four
#: record types, so four writers; more than that falls back to sorting).
_STAGING_WRITERS = 4
_WRITERS_CONF = "spark.sql.maxConcurrentOutputFileWriters"


def _write_by_record(spark: SparkSession, union: DataFrame, path: str) -> None:
    """Write ``union`` to ``path`` partitioned by ``record``, without a sort.

    By default a partitioned write sorts every task's rows by the partition
    column (one open file at a time), i.e. the whole engine output, a million
    rows per million requests, for four distinct values.  With concurrent
    writers each task keeps one file per record type open instead and writes
    its rows in the order the engine yields them: the same rows in as many
    files, no sort (measured: about 1 s of CPU per million requests).  The
    setting is this session's, so it is restored after.
    """
    previous = spark.conf.get(_WRITERS_CONF, None)
    spark.conf.set(_WRITERS_CONF, str(_STAGING_WRITERS))
    try:
        union.write.mode("overwrite").partitionBy("record").parquet(path)
    finally:
        if previous is None:
            spark.conf.unset(_WRITERS_CONF)
        else:
            spark.conf.set(_WRITERS_CONF, previous)


def _unpack_meta(row: Any) -> dict[str, Any]:
    """One union row of record ``meta`` as its named fields (as :func:`_named`)."""
    meta = row["meta"]
    return {name: meta[name] for name in RECORD_SCHEMAS["meta"].names if name != "ids"}


def replay_to(
    events: DataFrame,
    output: str,
    timeout_ms: int | Sequence[int] | None = None,
    replica_lag_max_ms: int | None = None,
    *,
    num_partitions: int | None = None,
    validate: bool = True,
) -> list[dict[str, Any]]:
    """Replay ``events`` and write ``outcomes/``, ``purgatory_size/``, ``rejected/``.

    The engine runs once: its union output is written to
    ``OUTPUT/union-staging`` (partitioned by record type), then each output is
    read back with its named columns and written as its own Parquet dataset,
    and the staging copy is deleted.  (Caching the union in Spark's memory
    instead costs more than this extra columnar write and read.)

    Duplicate request_ids are found without a Spark job of their own: each
    engine task reports the sorted ids it replayed (and rejects repeats it
    sees itself); the driver merges the lists.  Only if some id occurs twice
    does the replay run again, with every copy of those ids rejected.

    :return: the engine's meta records (worker, accelerated, events), one per task
    """
    import numpy as np

    spark = events.sparkSession
    base = output.rstrip("/")
    staging = base + "/union-staging"
    duplicates: str | Sequence[int] = "skip" if validate else "find"
    record = F.col("record")
    while True:
        frames = resolve_all(
            events,
            timeout_ms,
            replica_lag_max_ms,
            num_partitions=num_partitions,
            validate=validate,
            persist=False,
            duplicates=duplicates,
            report_ids=validate and duplicates == "skip",
        )
        _write_by_record(spark, frames.union, staging)
        staged = spark.read.parquet(staging)
        # Everything but the outcomes is small; partition pruning reads only it.
        small = staged.where(record != "outcome")
        check_ids = validate and duplicates == "skip"
        wanted = record == "meta"
        if check_ids:
            # The engines' own duplicate rejections, in the same job.
            wanted = wanted | (
                (record == "rejected")
                & (F.col("rejected.reason") == "duplicate request_id")
            )
        rows = collect(small.where(wanted))
        meta_rows = [r for r in rows if r["record"] == "meta"]
        if not check_ids:
            break
        blobs = [bytes(r["meta"]["ids"]) for r in meta_rows if r["meta"]["ids"]]
        ids = np.sort(
            np.concatenate([unpack_ids(b) for b in blobs])
            if blobs
            else np.zeros(0, dtype=np.int64)
        )
        repeated = set(ids[1:][ids[1:] == ids[:-1]].tolist())
        repeated.update(
            r["rejected"]["request_id"] for r in rows if r["record"] == "rejected"
        )
        if not repeated:
            break
        duplicates = sorted(repeated)  # replay again, rejecting every copy
    try:
        for kind, name in OUTPUT_DIRS.items():
            _named(staged.where(record == kind), kind).write.mode("overwrite").parquet(
                base + "/" + name
            )
        meta = [_unpack_meta(r) for r in meta_rows]
    finally:
        _delete_path(spark, staging)
    return meta
