"""Parsing request-log lines on Spark: one slim row per line.

Each line's JSON body is parsed once (``from_json`` with an explicit
schema) and reduced to its header fields, its times and the partitions of a
produce or a follower's fetch, as small arrays; the nested request and
response are not kept.  Every step is a Spark SQL expression: no Python
runs per line.
"""

from __future__ import annotations

from typing import Any

from ._log_schema import LINE_SCHEMA, MARKER, REQUEST_TIMED_OUT


def _json_body(value: Any) -> tuple[Any, Any]:
    """(is a request-log line, its JSON object or null).

    The object runs from the first marker to the line's last ``}`` (log4j
    appends `` (kafka.request.logger)``).  Every step is on bytes (find,
    copy): positions in characters (``instr``, ``substring`` and ``length``
    on strings) walk the whole 1-2 kB line each time, and took a fifth of
    the parse's CPU.  The marker is ASCII, so byte and character cuts agree.
    """
    from pyspark.sql import functions as F

    is_request = value.contains(MARKER)
    start = F.octet_length(F.substring_index(value, MARKER, 1)) + (len(MARKER) + 1)
    end = F.octet_length(value) - F.octet_length(F.substring_index(value, "}", -1))
    body = F.substring(value.cast("binary"), start, end - start + 1).cast("string")
    return is_request, F.when(is_request, body)


def _completed_ms(value: Any, timezone: str) -> Any:
    """The line's ``[yyyy-MM-dd HH:mm:ss,SSS]`` (log4j's %d, at fixed
    positions) in epoch ms, or null."""
    from pyspark.sql import functions as F

    def part(pos: int, n: int) -> Any:
        return F.substring(value, pos, n).try_cast("int")

    secs = ((part(19, 2) * 1000 + part(22, 3)) / F.lit(1000)).cast("decimal(8,3)")
    stamp = F.try_make_timestamp(
        part(2, 4),
        part(7, 2),
        part(10, 2),
        part(13, 2),
        part(16, 2),
        secs,
        F.lit(timezone),
    )
    bracketed = (F.substring(value, 1, 1) == "[") & (F.substring(value, 25, 1) == "]")
    return F.when(bracketed, F.unix_millis(stamp))


def _read_lines(spark: Any, files: list[str], timezone: str) -> Any:
    """One row per line: ``line_id``, the text, ``is_request``,
    ``completed_ms`` and the parsed JSON ``j`` (null for other lines)."""
    from pyspark.sql import functions as F

    value = F.col("value")
    is_request, body = _json_body(value)
    return spark.read.text(files).select(
        F.monotonically_increasing_id().alias("line_id"),
        value,
        is_request.alias("is_request"),
        _completed_ms(value, timezone).alias("completed_ms"),
        F.from_json(body, LINE_SCHEMA, {"mode": "PERMISSIVE"}).alias("j"),
    )


def _line_fields(raw: Any) -> Any:
    """The fields of each line the import keeps: kind, header, times in µs,
    and its request and response (still nested)."""
    from pyspark.sql import functions as F

    header = F.col("j.requestHeader")

    def us(name: str) -> Any:
        return F.round(F.col("j")[name] * 1000).cast("long")

    ok = (
        F.col("is_request")
        & F.col("completed_ms").isNotNull()
        & header["requestApiKey"].isNotNull()
    )
    kind = (
        F.when(~F.col("is_request"), F.lit("other line"))
        .when(~ok, F.lit("unparseable"))
        .otherwise(
            F.coalesce(
                header["requestApiKeyName"],
                F.concat(F.lit("api "), header["requestApiKey"].cast("string")),
            )
        )
    )
    replica = F.coalesce(
        F.col("j.request.replicaState.replicaId"), F.col("j.request.replicaId")
    )
    return raw.select(
        "line_id",
        F.when(F.col("is_request") & ~ok, F.col("value")).alias("line"),
        kind.alias("kind"),
        F.when(ok, header["requestApiKey"]).alias("api_key"),
        F.when(ok, header["requestApiKeyName"]).alias("api"),
        header["requestApiVersion"].alias("api_version"),
        header["correlationId"].alias("correlation_id"),
        header["clientId"].alias("client_id"),
        F.col("j.connection").alias("connection"),
        "completed_ms",
        # The end of the request's local time (see the module docstring).
        (
            F.col("completed_ms") * 1000
            - us("totalTimeMs")
            + us("requestQueueTimeMs")
            + us("localTimeMs")
        ).alias("effect_us"),
        F.col("j.remoteTimeMs").alias("remote_time_ms"),
        replica.alias("replica"),
        F.col("j.request").alias("request"),
        F.col("j.response").alias("response"),
    )


def _partition_arrays(lines: Any, key: Any) -> Any:
    """``lines`` with its request and response replaced by what the import
    keeps of them: ``produce_parts`` (partition, and the response's error and
    base offset for it) with ``request_partitions``, or ``fetch_parts``
    (partition, fetch offset, error) of a follower's fetch."""
    from pyspark.sql import functions as F

    produce = F.col("api_key") == 0
    follower = (F.col("api_key") == 1) & (F.col("replica") >= 0)
    acks = F.col("acks")
    with_lookups = lines.select(
        "*",
        F.col("request.acks").alias("acks"),
        F.when(produce, _produce_responses()).alias("_resp"),
        F.when(follower, _fetch_errors()).alias("_errors"),
    )
    kept = [c for c in lines.columns if c not in ("request", "response")]
    arrays = with_lookups.select(
        *kept,
        "acks",
        F.col("request.timeoutMs").cast("long").alias("timeout_ms"),
        F.col("response.errorCode").alias("top_error"),
        F.when(produce, _produce_parts(key)).alias("produce_parts"),
        F.when(follower, _fetch_parts(key)).alias("fetch_parts"),
    )
    waited = F.size(
        F.filter(
            F.col("produce_parts"),
            lambda p: (acks == -1) & p["r"]["error"].isin(0, REQUEST_TIMED_OUT),
        )
    )
    return arrays.withColumn("request_partitions", F.when(produce, waited))


def _parse_lines(spark: Any, files: list[str], timezone: str, key: Any) -> Any:
    """One row per line: its kind, timestamp, header fields, times in µs, and
    the partitions of its produce or follower fetch (see the plan above)."""
    return _partition_arrays(_line_fields(_read_lines(spark, files, timezone)), key)


def _topic_key(topic_ids: dict[str, str]) -> Any:
    """(name, topicId) -> the topic part of the partition key (ids mapped)."""
    from pyspark.sql import functions as F

    def key(name: Any, topic_id: Any) -> Any:
        mapped = topic_id
        if topic_ids:
            pairs = [F.lit(x) for kv in sorted(topic_ids.items()) for x in kv]
            mapped = F.coalesce(F.element_at(F.create_map(*pairs), topic_id), topic_id)
        return F.coalesce(name, mapped)

    return key


def _part_key(topic: Any, index: Any) -> Any:
    """``topic-index``, Kafka's TopicPartition.toString (the watch key)."""
    from pyspark.sql import functions as F

    return F.concat(topic, F.lit("-"), index.cast("string"))


def _nested(topics: str, partitions: str, make: Any) -> Any:
    """``make(topic, partition)`` for every partition of every topic, flattened."""
    from pyspark.sql import functions as F

    return F.flatten(
        F.transform(
            F.col(topics), lambda t: F.transform(t[partitions], lambda p: make(t, p))
        )
    )


def _produce_responses() -> Any:
    """Each partition of a produce response: (key, error, baseOffset)."""
    from pyspark.sql import functions as F

    return _nested(
        "response.responses",
        "partitionResponses",
        lambda t, p: F.struct(
            _part_key(F.coalesce(t["name"], t["topicId"]), p["index"]).alias("k"),
            p["errorCode"].alias("error"),
            p["baseOffset"].alias("base"),
        ),
    )


def _produce_parts(key: Any) -> Any:
    """Each partition of a produce request with its response (``_resp``)."""
    from pyspark.sql import functions as F

    parts = _nested(
        "request.topicData",
        "partitionData",
        lambda t, p: F.struct(
            _part_key(key(t["name"], t["topicId"]), p["index"]).alias("partition"),
            _part_key(F.coalesce(t["name"], t["topicId"]), p["index"]).alias("k"),
        ),
    )
    return F.transform(
        parts,
        lambda p: F.struct(
            p["partition"].alias("partition"),
            F.get(F.filter(F.col("_resp"), lambda r: r["k"] == p["k"]), 0).alias("r"),
        ),
    )


def _fetch_errors() -> Any:
    """Each partition of a fetch response: (key, error)."""
    from pyspark.sql import functions as F

    return _nested(
        "response.responses",
        "partitions",
        lambda t, p: F.struct(
            _part_key(F.coalesce(t["topic"], t["topicId"]), p["partitionIndex"]).alias(
                "k"
            ),
            p["errorCode"].alias("error"),
        ),
    )


def _fetch_parts(key: Any) -> Any:
    """Each partition of a fetch request: (partition, fetchOffset, error)."""
    from pyspark.sql import functions as F

    parts = _nested(
        "request.topics",
        "partitions",
        lambda t, p: F.struct(
            _part_key(key(t["topic"], t["topicId"]), p["partition"]).alias("partition"),
            _part_key(F.coalesce(t["topic"], t["topicId"]), p["partition"]).alias("k"),
            p["fetchOffset"].alias("fetch_offset"),
        ),
    )
    return F.transform(
        parts,
        lambda p: F.struct(
            p["partition"].alias("partition"),
            p["fetch_offset"].alias("fetch_offset"),
            F.get(F.filter(F.col("_errors"), lambda e: e["k"] == p["k"]), 0)[
                "error"
            ].alias("error"),
        ),
    )
