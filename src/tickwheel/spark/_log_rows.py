"""Deriving the import's rows from the parsed lines, on Spark.

One row per partition of a produce or of a follower's fetch (and one per
other line, for the counts), each append's end offset from the next append
on its partition, and the reason a row is skipped; then the cut into
``events/`` and ``skipped/``.
"""

from __future__ import annotations

from typing import Any

from ._log_parse import _parse_lines, _topic_key
from ._log_schema import (
    ERROR_NAMES,
    EVENT_COLUMNS,
    REQUEST_TIMED_OUT,
    ROW_COLUMNS,
    SKIPPED_COLUMNS,
    UNPARSEABLE,
)


def _ceil_ms(us_col: Any) -> Any:
    from pyspark.sql import functions as F

    return F.floor((us_col + 999) / F.lit(1000)).cast("long")


def _reason_for_error(code: Any, prefix: str) -> Any:
    from pyspark.sql import functions as F

    names = F.create_map(*[F.lit(x) for kv in sorted(ERROR_NAMES.items()) for x in kv])
    name = F.coalesce(F.element_at(names, code), F.lit("?"))
    return F.concat(F.lit(prefix), code.cast("string"), F.lit(" "), name)


def _select(rows: Any, types: dict[str, str], **given: Any) -> Any:
    """The columns of ``types``, in order: ``given`` (a column or a column
    name), else the column of that name in ``rows``, else null; each cast."""
    from pyspark.sql import functions as F

    columns = []
    for name, dtype in types.items():
        value = given.get(name, name if name in rows.columns else None)
        column = F.col(value) if isinstance(value, str) else value
        columns.append(
            (F.lit(None) if column is None else column).cast(dtype).alias(name)
        )
    return rows.select(*columns)


def _produce_reason() -> Any:
    """Why a produce partition never waited in the purgatory, or null (the
    window's reasons come later, in :func:`_import_rows`)."""
    from pyspark.sql import functions as F

    error, acks = F.col("error"), F.col("acks")
    return (
        F.when(F.col("partition").isNull(), F.lit("produce without partitions"))
        .when(acks == 0, F.lit("acks=0"))
        .when(acks == 1, F.lit("acks=1"))
        .when(acks != -1, F.concat(F.lit("acks="), acks.cast("string")))
        .when(error.isNull(), F.lit("no response for the partition"))
        .when(~error.isin(0, REQUEST_TIMED_OUT), _reason_for_error(error, "error "))
        .when(F.col("base").isNull() | (F.col("base") < 0), F.lit("no baseOffset"))
        .when(F.col("ts_ms").isNull(), F.lit("no request times"))
        .when(F.col("timeout_ms").isNull(), F.lit("no timeoutMs"))
    )


def _fetch_reason() -> Any:
    """Why a follower's fetch of a partition is not an event, or null."""
    from pyspark.sql import functions as F

    top, error = F.col("top_error"), F.col("error")
    return (
        F.when(top.isNotNull() & (top != 0), _reason_for_error(top, "fetch error "))
        .when(
            error.isNotNull() & (error != 0), _reason_for_error(error, "fetch error ")
        )
        .when(
            F.col("fetch_offset").isNull() | (F.col("fetch_offset") < 0),
            F.lit("no fetchOffset"),
        )
        .when(F.col("ts_ms").isNull(), F.lit("no request times"))
    )


#: What each row of :func:`_import_rows` is (``row``): a produce partition, a
#: follower's fetch of a partition, an unparseable line, or a line that is
#: only counted (other lines, other requests, consumers' fetches, a
#: follower's fetch without partitions).
PRODUCE_ROW, FETCH_ROW, BAD_ROW, COUNTED_ROW = "produce", "fetch", "bad", "counted"


#: The columns :func:`_import_rows` adds to ``ROW_COLUMNS``: what the row is,
#: whether it is its line's first, the line's kind and fetch source (for the
#: line counts), and ``line_id`` (never null, unlike ``log_request_id``).
COUNT_COLUMNS = {
    "row": "string",
    "first": "boolean",
    "line_kind": "string",
    "source": "string",
    "line_id": "bigint",
}


#: Groups the rows that are not appends pass the window in (see _import_rows).
WINDOW_SPREAD = 64


def _import_rows(lines: Any) -> Any:
    """Every row of ``events/`` and ``skipped/`` (``reason`` null for
    events), and one row for each line that is only counted; columns
    ``ROW_COLUMNS`` plus ``row`` (what the row is), ``first`` (the first row
    of its line), ``line_kind`` and ``source`` (the line's kind and, for a
    fetch, follower or consumer).

    One branch over ``lines``: a single explode gives every partition of a
    produce or of a follower's fetch its row (and every other line one row),
    and a single window over all of them gives each append its end offset.
    Two branches (a union, or a filter and its complement) would each run
    the whole parse below them.
    """
    from pyspark.sql import functions as F

    flat = _exploded_rows(lines)
    is_ = {name: F.col("row") == name for name in (PRODUCE_ROW, FETCH_ROW, BAD_ROW)}
    reason = (
        F.when(is_[PRODUCE_ROW], _produce_reason())
        .when(is_[FETCH_ROW], _fetch_reason())
        .when(is_[BAD_ROW], F.lit(UNPARSEABLE))
    )
    appended = F.coalesce(is_[PRODUCE_ROW] & (F.col("base") >= 0), F.lit(False))
    with_next = flat.select(
        "*", reason.alias("reason0"), _next_base(appended).alias("next_base")
    )
    final_reason = F.coalesce(
        F.col("reason0"),
        F.when(
            appended & F.col("next_base").isNull(),
            F.lit("no later append on the partition (end offset unknown)"),
        ).when(
            appended & (F.col("next_base") <= F.col("base")),
            F.lit("baseOffset repeats"),
        ),
    )
    produce_or_fetch = is_[PRODUCE_ROW] | is_[FETCH_ROW]
    produce_or_bad = is_[PRODUCE_ROW] | is_[BAD_ROW]
    return _select(
        with_next,
        {**ROW_COLUMNS, **COUNT_COLUMNS},
        ts_ms=F.when(produce_or_fetch, F.col("ts_ms")),
        kind=F.when(is_[PRODUCE_ROW], F.lit("produce"))
        .when(is_[FETCH_ROW], F.lit("fetch"))
        .when(is_[BAD_ROW], F.col("line_kind")),
        required_offset="next_base",
        timeout_ms=F.when(produce_or_bad, F.col("timeout_ms")),
        replica=F.when(~is_[PRODUCE_ROW], F.col("replica")),
        log_request_id=F.when(produce_or_fetch, F.col("line_id")),
        remote_time_ms=F.when(produce_or_bad, F.col("remote_time_ms")),
        broker_error_code=F.when(is_[PRODUCE_ROW], F.col("error")),
        reason=final_reason,
        api=F.when(is_[PRODUCE_ROW], F.lit("PRODUCE")).when(
            is_[FETCH_ROW], F.lit("FETCH")
        ),
    )


def _row_parts() -> Any:
    """Each line's partitions, one shape for both kinds: those of a produce
    (with its response's error and base offset) or of a follower's fetch
    (with its fetch offset and error); null for every other line."""
    from pyspark.sql import functions as F

    produce = F.col("api_key") == 0
    follower = (F.col("api_key") == 1) & (F.col("replica") >= 0)
    no_long = F.lit(None).cast("bigint")
    return F.when(
        produce,
        F.transform(
            "produce_parts",
            lambda p: F.struct(
                p["partition"].alias("partition"),
                p["r"]["error"].alias("error"),
                p["r"]["base"].alias("base"),
                no_long.alias("fetch_offset"),
            ),
        ),
    ).when(
        follower,
        F.transform(
            "fetch_parts",
            lambda p: F.struct(
                p["partition"].alias("partition"),
                p["error"].alias("error"),
                no_long.alias("base"),
                p["fetch_offset"].alias("fetch_offset"),
            ),
        ),
    )


def _exploded_rows(lines: Any) -> Any:
    """One row per partition of a produce or a follower's fetch, and one per
    other line: what the row is (``row``), whether it is its line's first,
    the line's kind and fetch source, and the line's fields the outputs keep."""
    from pyspark.sql import functions as F

    produce = F.col("api_key") == 0
    follower = (F.col("api_key") == 1) & (F.col("replica") >= 0)
    # A produce without partitions keeps its one (outer) row, as a skipped
    # row; a follower's fetch without any is only counted.
    exploded = lines.select("*", F.posexplode_outer(_row_parts()).alias("pos", "p"))
    row = (
        F.when(produce, F.lit(PRODUCE_ROW))
        .when(follower & F.col("pos").isNotNull(), F.lit(FETCH_ROW))
        .when(F.col("kind") == "unparseable", F.lit(BAD_ROW))
        .otherwise(F.lit(COUNTED_ROW))
    )
    fetch_from = F.when(
        F.col("kind") == "FETCH",
        F.when(F.col("replica") >= 0, "follower").otherwise("consumer"),
    )
    return exploded.select(
        row.alias("row"),
        (F.col("pos").isNull() | (F.col("pos") == 0)).alias("first"),
        F.col("kind").alias("line_kind"),
        fetch_from.alias("source"),
        "line_id",
        # Numbered among the produce rows only (the expression runs for those
        # alone), as a select of them would number them.
        F.when(produce, F.monotonically_increasing_id()).alias("request_id"),
        F.col("p.partition").alias("partition"),
        F.col("p.error").alias("error"),
        F.col("p.base").alias("base"),
        F.col("p.fetch_offset").alias("fetch_offset"),
        _ceil_ms(F.col("effect_us")).alias("ts_ms"),
        "acks",
        "timeout_ms",
        "top_error",
        "request_partitions",
        "remote_time_ms",
        "replica",
        "client_id",
        "correlation_id",
        "connection",
        "api_version",
        "completed_ms",
        "line",
    )


def _next_base(appended: Any) -> Any:
    """The end offset of an append (``appended``: a produce row with a base
    offset): the next append's baseOffset on the partition."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # Every produce partition with a base offset counts, whatever its acks.
    # The other rows pass the same window (one branch), in WINDOW_SPREAD
    # groups by line, whose lead nobody reads: enough groups to spread them
    # over the tasks, few enough that the window does not set up a group
    # per row.
    by_offset = Window.partitionBy(
        F.when(appended, F.col("partition")),
        F.when(~appended, F.col("line_id") % WINDOW_SPREAD),
    ).orderBy("base")
    return F.when(appended, F.lead("base").over(by_offset))


def _split(rows: Any) -> tuple[Any, Any]:
    """(events, skipped) of :func:`_import_rows`."""
    from pyspark.sql import functions as F

    # kind and log_request_id as expressions Spark knows are never null, so
    # that the events table's schema says so, as it always has.
    events = _select(
        rows.where(
            F.col("row").isin(PRODUCE_ROW, FETCH_ROW) & F.col("reason").isNull()
        ),
        EVENT_COLUMNS,
        kind=F.when(F.col("row") == PRODUCE_ROW, F.lit("produce")).otherwise(
            F.lit("fetch")
        ),
        log_request_id="line_id",
    )
    skipped = _select(rows.where(F.col("reason").isNotNull()), SKIPPED_COLUMNS)
    return events, skipped


def import_frames(
    spark: Any,
    files: list[str],
    topic_ids: dict[str, str] | None = None,
    timezone: str = "UTC",
) -> tuple[Any, Any, Any]:
    """(events, skipped, parsed lines) DataFrames of request-log ``files``.

    ``parsed`` has one row per input line (``kind``: ``other line``,
    ``unparseable`` or the API name).  Each of the three runs the parse on
    its own; the import itself persists the rows both outputs are cut from.
    """
    lines = _parse_lines(spark, files, timezone, _topic_key(topic_ids or {}))
    events, skipped = _split(_import_rows(lines))
    return events, skipped, lines
