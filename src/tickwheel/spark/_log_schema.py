"""The request-log import's columns: what it reads and what it writes.

The fields of a request-log line it parses (``LINE_SCHEMA``), the columns
of ``events/`` and ``skipped/``, and the Kafka error codes it names.  Data
only: :mod:`tickwheel.spark.request_log` says how each column is derived.
"""

from __future__ import annotations

MARKER = "Completed request:"


REQUEST_TIMED_OUT = 7


UNPARSEABLE = "unparseable request-log line"


#: Columns the import adds to the binding events schema (the replay ignores
#: them; the replay-vs-broker comparison reads them).
EVENT_EXTRA_COLUMNS = {
    "log_request_id": "bigint",
    "request_partitions": "int",
    "remote_time_ms": "double",
    "broker_error_code": "int",
    "client_id": "string",
    "correlation_id": "int",
    "connection": "string",
    "api_version": "int",
}


#: The events table the import writes: the binding columns, then the extras.
EVENT_COLUMNS = {
    "ts_ms": "bigint",
    "partition": "string",
    "kind": "string",
    "request_id": "bigint",
    "required_offset": "bigint",
    "timeout_ms": "bigint",
    "replica": "int",
    "fetch_offset": "bigint",
    **EVENT_EXTRA_COLUMNS,
}


SKIPPED_COLUMNS = {
    "reason": "string",
    "api": "string",
    "completed_ms": "bigint",
    "connection": "string",
    "correlation_id": "int",
    "client_id": "string",
    "partition": "string",
    "line": "string",
}


#: Names of the error codes a produce or fetch response commonly carries
#: (Kafka's ``org.apache.kafka.common.protocol.Errors``).
ERROR_NAMES = {
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    29: "TOPIC_AUTHORIZATION_FAILED",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH",
    56: "KAFKA_STORAGE_ERROR",
    74: "FENCED_LEADER_EPOCH",
    87: "INVALID_RECORD",
    100: "UNKNOWN_TOPIC_ID",
}


# The fields the import reads, in both version shapes (Kafka's message
# schemas: ProduceRequest/ProduceResponse/FetchRequest/FetchResponse.json).
# Fields of other versions are simply absent (null) in a line.
LINE_SCHEMA = """
requestHeader STRUCT<requestApiKey: INT, requestApiVersion: INT,
  correlationId: INT, clientId: STRING, requestApiKeyName: STRING>,
request STRUCT<
  acks: INT, timeoutMs: INT,
  topicData: ARRAY<STRUCT<name: STRING, topicId: STRING,
    partitionData: ARRAY<STRUCT<index: INT>>>>,
  replicaId: INT, replicaState: STRUCT<replicaId: INT>,
  topics: ARRAY<STRUCT<topic: STRING, topicId: STRING,
    partitions: ARRAY<STRUCT<partition: INT, fetchOffset: BIGINT>>>>>,
response STRUCT<errorCode: INT,
  responses: ARRAY<STRUCT<name: STRING, topic: STRING, topicId: STRING,
    partitionResponses: ARRAY<STRUCT<index: INT, errorCode: INT, baseOffset: BIGINT>>,
    partitions: ARRAY<STRUCT<partitionIndex: INT, errorCode: INT>>>>>,
connection STRING, totalTimeMs DOUBLE, requestQueueTimeMs DOUBLE,
localTimeMs DOUBLE, remoteTimeMs DOUBLE
"""


#: Every column of ``events/`` and of ``skipped/``: the produce and fetch rows
#: both are cut from.
ROW_COLUMNS = {
    **EVENT_COLUMNS,
    **{k: v for k, v in SKIPPED_COLUMNS.items() if k not in EVENT_COLUMNS},
}
