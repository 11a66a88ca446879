"""A generator of Kafka request-log lines whose truth is known (tests, README sample).

What it writes is what a broker with ``kafka.request.logger`` at DEBUG
writes: ``[yyyy-MM-dd HH:mm:ss,SSS] DEBUG Completed request:{json}
(kafka.request.logger)``, the JSON in the camelCase of Kafka's message
schemas (``RequestConvertToJson.requestDescMetrics``), for

* produce v9-v13: by topic name up to v12, by ``topicId`` on v13; acks -1,
  1 and 0 (no response); multi-partition requests; error responses
  (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS) that appended nothing;
  REQUEST_TIMED_OUT on the partitions the reference replay expired;
* fetch v12-v17 from followers (``replicaId`` up to v14,
  ``replicaState.replicaId`` from v15) and from consumers, one with a
  partition error that must not be imported;
* Metadata and ApiVersions lines, garbage lines (other loggers, a stack
  trace, a truncated request line, a line without a timestamp).

The timing comes from a *reference replay*: the events of a synthetic
trace (:func:`tickwheel.spark.trace.generate_trace`) are replayed in this
process (:func:`tickwheel.spark.engine.replay_table`), and each produce's
``remoteTimeMs`` is its replayed latency, its error code 7 where the replay
expired it.  So importing the log and replaying it again must agree with
the broker 100 %, with a latency difference of exactly 0.

Every instant is a whole millisecond (the replay's resolution); the other
times of a line (queue, local, response queue, send) have microsecond
fractions, and the line's timestamp is the completion instant truncated to
the millisecond, as log4j prints it.  The importer's rule (the end of the
local time, rounded up to the ms) recovers each whole-ms instant exactly.

    python tests/spark/request_log_gen.py OUT.log.gz [--requests N] [--seed S]

writes one gzipped log (the README sample is made so).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tickwheel.spark.engine import replay_table
from tickwheel.spark.trace import EVENT_SCHEMA, generate_trace

TOPIC_IDS = {"orders": "b3JkZXJzLXRvcGljLWlkAA", "payments": "cGF5bWVudHMtdG9waWMtaQ"}
LEADER = 1


@dataclass
class GeneratedLog:
    """The lines and what an import of them must find."""

    lines: list[str]
    #: Expected events: the binding columns (no request_id) and the extras
    #: (no log_request_id); ``key`` is (connection, correlation_id).
    events: list[dict[str, Any]]
    skipped: Counter[str]
    #: (connection, correlation_id) -> (expired, latency ms) of the reference.
    requests: dict[tuple[str, int], tuple[bool, int]]
    counts: Counter[str] = field(default_factory=Counter)
    topic_ids: dict[str, str] = field(default_factory=dict)

    def write(self, directory: str) -> list[str]:
        """Split the lines over a gzipped, a rotated and a current file."""
        os.makedirs(directory, exist_ok=True)
        n = len(self.lines)
        cuts = [0, n // 3, 2 * n // 3, n]
        names = [
            "kafka-request.log.2025-03-01-10.gz",
            "kafka-request.log.2025-03-01-11",
            "kafka-request.log",
        ]
        paths = []
        for name, lo, hi in zip(names, cuts, cuts[1:]):
            path = os.path.join(directory, name)
            text = "".join(line + "\n" for line in self.lines[lo:hi])
            if name.endswith(".gz"):
                with gzip.open(path, "wt", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
            paths.append(path)
        return paths


def _stamp(ms: int) -> str:
    secs, rest = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(secs)) + f",{rest:03d}"


class _Writer:
    """Builds lines; all times in integer µs, printed as ms doubles (Java style)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.out: list[tuple[int, int, str]] = []  # (completion µs, seq, line)
        self.correlation: Counter[str] = Counter()

    def small_us(self, hi: int = 900) -> int:
        return int(self.rng.integers(1, hi))

    def line(
        self,
        effect_ms: int,
        remote_us: int,
        header: dict[str, Any],
        request: Any,
        response: Any,
        connection: str,
    ) -> int:
        """Add a line whose local time ends at ``effect_ms``; return its correlation."""
        queue, local = self.small_us(300), self.small_us()
        response_queue, send = self.small_us(200), self.small_us(400)
        completed_us = effect_ms * 1000 + remote_us + response_queue + send
        total = queue + local + remote_us + response_queue + send
        correlation = self.correlation[connection]
        self.correlation[connection] += 1
        body = {
            "isForwarded": False,
            "requestHeader": {**header, "correlationId": correlation},
            "request": request,
            "response": response,
            "connection": connection,
            "totalTimeMs": total / 1000,
            "requestQueueTimeMs": queue / 1000,
            "localTimeMs": local / 1000,
            "remoteTimeMs": remote_us / 1000,
            "throttleTimeMs": 0,
            "responseQueueTimeMs": response_queue / 1000,
            "sendTimeMs": send / 1000,
            "securityProtocol": "PLAINTEXT",
            "principal": "User:ANONYMOUS",
            "listener": "PLAINTEXT",
            "clientInformation": {
                "softwareName": "apache-kafka-java",
                "softwareVersion": "4.1.0",
            },
        }
        text = (
            f"[{_stamp(completed_us // 1000)}] DEBUG Completed request:"
            f"{json.dumps(body, separators=(',', ':'))} (kafka.request.logger)"
        )
        self.out.append((completed_us, len(self.out), text))
        return correlation


def _header(api_key: int, name: str, version: int, client: str) -> dict[str, Any]:
    return {
        "requestApiKey": api_key,
        "requestApiVersion": version,
        "clientId": client,
        "requestApiKeyName": name,
    }


def generate(
    requests: int = 600,
    partitions: int = 8,
    *,
    seed: int = 1,
    by_name: bool = False,
    start_ms: int = 1_740_830_400_000,
) -> GeneratedLog:
    """Make a request log from a reference replay of a synthetic trace.

    Trace partitions ``orders-<p>`` become topic ``orders`` (the first half,
    produced and fetched by name) and ``payments`` (the second half, by
    topic id: produce v13, fetch v13+).  ``by_name``: the lines name both
    topics either way at random (a mapping file is then needed, and the
    expected partition keys are names); otherwise ``payments`` partitions
    are keyed by its id.
    """
    rng = np.random.default_rng(seed)
    trace = generate_trace(
        requests,
        partitions,
        seed=seed,
        rate_per_s=400.0,
        start_ms=start_ms,
        timeouts_ms=(30_000, 5_000, 1_000, 200),
        rf1_every=0,
    ).to_pylist()
    half = max(1, partitions // 2)

    def topic_of(name: str) -> tuple[str, int]:
        p = int(name.rsplit("-", 1)[1])
        return ("orders", p) if p < half else ("payments", p - half)

    def key(topic: str, index: int) -> str:
        if topic == "payments" and not by_name:
            return f"{TOPIC_IDS['payments']}-{index}"
        return f"{topic}-{index}"

    w = _Writer(rng)
    skipped: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    produce = [r for r in trace if r["kind"] == "produce"]
    fetches = [r for r in trace if r["kind"] == "fetch"]
    # Base offsets: appends to a partition are contiguous from offset 0.
    produce.sort(key=lambda r: (r["partition"], r["required_offset"]))
    last_end: dict[str, int] = {}
    for r in produce:
        r["base"] = last_end.get(r["partition"], 0)
        last_end[r["partition"]] = r["required_offset"]
        r["acks"] = 1 if rng.random() < 0.1 else -1
    # One partition gets no closing append: its last acks=-1 append has no
    # successor, so its end offset is unknown.
    open_partition = "orders-0"
    for r in produce:
        r["successor"] = r["partition"] != open_partition or (
            r["required_offset"] != last_end[r["partition"]]
        )
    replayed = [r for r in produce if r["acks"] == -1 and r["successor"]]
    reference_rows = [
        {**r, "partition": key(*topic_of(r["partition"]))} for r in replayed + fetches
    ]
    for r in reference_rows:
        for extra in ("base", "acks", "successor"):
            r.pop(extra, None)
    result = replay_table(pa.Table.from_pylist(reference_rows, schema=EVENT_SCHEMA))
    outcome = {
        row["request_id"]: (row["outcome"] == "expired", row["latency_ms"])
        for row in result.outcomes.to_pylist()
    }

    # Requests: acks=-1 rows at the same ms with the same timeout and topic
    # share a request (up to 3 partitions); everything else is on its own.
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in produce:
        topic, _ = topic_of(r["partition"])
        if r["acks"] == -1:
            g = (r["ts_ms"], r["timeout_ms"], topic)
            bucket = groups.setdefault(g, [])
            if (
                bucket
                and len(bucket[-1]) < 3
                and all(x["partition"] != r["partition"] for x in bucket[-1])
            ):
                bucket[-1].append(r)
            else:
                bucket.append([r])
        else:
            groups.setdefault(("acks1", r["request_id"]), []).append([r])
    events: list[dict[str, Any]] = []
    reference: dict[tuple[str, int], tuple[bool, int]] = {}
    producers = [f"producer-{i}" for i in range(1, 4)]

    def version_for(topics: set[str]) -> tuple[int, bool]:
        """(produce version, by id)."""
        if by_name:
            v = int(rng.integers(9, 14))
            return v, v >= 13
        if "payments" in topics:
            return 13, True
        return int(rng.integers(9, 13)), False

    def produce_line(
        rows: list[dict[str, Any]],
        acks: int,
        remote_ms: int,
        errors: list[int],
        bases: list[int],
        client: str,
        effect_ms: int,
        timeout_ms: int,
    ) -> tuple[str, int, int]:
        topics: dict[str, list[tuple[int, int, int]]] = {}
        for (topic, index), err, base in zip(
            [(r["topic"], r["index"]) for r in rows], errors, bases
        ):
            topics.setdefault(topic, []).append((index, err, base))
        version, by_id = version_for(set(topics))

        def name(topic: str) -> dict[str, str]:
            return {"topicId": TOPIC_IDS[topic]} if by_id else {"name": topic}

        request = {
            "transactionalId": None,
            "acks": acks,
            "timeoutMs": timeout_ms,
            "topicData": [
                {
                    **name(t),
                    "partitionData": [
                        {"index": i, "recordsSizeInBytes": int(rng.integers(100, 9000))}
                        for i, _, _ in parts
                    ],
                }
                for t, parts in topics.items()
            ],
        }
        response: Any = (
            ""
            if acks == 0
            else {
                "responses": [
                    {
                        **name(t),
                        "partitionResponses": [
                            {
                                "index": i,
                                "errorCode": e,
                                "baseOffset": b,
                                "logAppendTimeMs": -1,
                                "logStartOffset": 0,
                                "recordErrors": [],
                                "errorMessage": None,
                            }
                            for i, e, b in parts
                        ],
                    }
                    for t, parts in topics.items()
                ],
                "throttleTimeMs": 0,
            }
        )
        connection = f"10.0.0.{LEADER}:9092-10.0.1.{client[-1]}:4{client[-1]}000-0"
        header = _header(0, "PRODUCE", version, client)
        correlation = w.line(
            effect_ms, remote_ms * 1000, header, request, response, connection
        )
        return connection, correlation, version

    for bucket in groups.values():
        for rows in bucket:
            for r in rows:
                r["topic"], r["index"] = topic_of(r["partition"])
            client = producers[int(rng.integers(0, 3))]
            first = rows[0]
            if first["acks"] == 1:
                produce_line(
                    rows,
                    1,
                    0,
                    [0],
                    [first["base"]],
                    client,
                    first["ts_ms"],
                    first["timeout_ms"],
                )
                skipped["acks=1"] += 1
                continue
            results = [outcome.get(r["request_id"]) for r in rows]
            known = [x for x in results if x is not None]
            remote = max((lat for _, lat in known), default=1)
            errors = [7 if x is not None and x[0] else 0 for x in results]
            extra_rows: list[dict[str, Any]] = []
            extra_errors: list[int] = []
            if len(rows) > 1 and rng.random() < 0.3:
                # A partition the append failed on: no offset, not replayed.
                taken = {r["partition"] for r in rows}
                spare = [
                    f"orders-{p}"
                    for p in range(partitions)
                    if f"orders-{p}" not in taken
                    and topic_of(f"orders-{p}")[0] == first["topic"]
                ]
                if spare:
                    t, i = topic_of(spare[0])
                    extra_rows.append({"topic": t, "index": i})
                    extra_errors.append(6)
                    skipped["error 6 NOT_LEADER_OR_FOLLOWER"] += 1
            connection, correlation, version = produce_line(
                rows + extra_rows,
                -1,
                remote,
                errors + extra_errors,
                [r["base"] for r in rows] + [-1] * len(extra_rows),
                client,
                first["ts_ms"],
                first["timeout_ms"],
            )
            if len(known) == len(rows):
                reference[(connection, correlation)] = (
                    any(e for e, _ in known),
                    remote,
                )
            for r, res, err in zip(rows, results, errors):
                if res is None:
                    skipped[
                        "no later append on the partition (end offset unknown)"
                    ] += 1
                    continue
                events.append(
                    {
                        "ts_ms": r["ts_ms"],
                        "partition": key(r["topic"], r["index"]),
                        "kind": "produce",
                        "required_offset": r["required_offset"],
                        "timeout_ms": r["timeout_ms"],
                        "replica": None,
                        "fetch_offset": None,
                        "key": (connection, correlation),
                        "request_partitions": len(rows),
                        "remote_time_ms": float(remote),
                        "broker_error_code": err,
                        "client_id": client,
                        "api_version": version,
                    }
                )
    end_ms = max(r["ts_ms"] for r in trace) + 1
    # Closing acks=1 appends: the successors of each partition's last append.
    for part, end in sorted(last_end.items()):
        if part == open_partition:
            continue
        t, i = topic_of(part)
        produce_line(
            [{"topic": t, "index": i}], 1, 0, [0], [end], "producer-1", end_ms, 30_000
        )
        skipped["acks=1"] += 1
    # Requests that failed before the append (acks=-1, never in the purgatory).
    for n in range(5):
        t, i = topic_of(f"orders-{n % partitions}")
        code = 6 if n % 2 else 19
        produce_line(
            [{"topic": t, "index": i}],
            -1,
            0,
            [code],
            [-1],
            "producer-2",
            end_ms - n,
            30_000,
        )
        name = "NOT_LEADER_OR_FOLLOWER" if code == 6 else "NOT_ENOUGH_REPLICAS"
        skipped[f"error {code} {name}"] += 1
    # Fire-and-forget traffic on its own topic (acks=0: no response).
    for n in range(6):
        request = {
            "acks": 0,
            "timeoutMs": 30_000,
            "topicData": [
                {
                    "name": "metrics",
                    "partitionData": [{"index": n % 2, "recordsSizeInBytes": 80}],
                }
            ],
        }
        w.line(
            end_ms - 10 * n,
            0,
            _header(0, "PRODUCE", 9, "metrics-agent"),
            request,
            "",
            "10.0.0.1:9092-10.0.2.9:49000-0",
        )
        skipped["acks=0"] += 1
    counts["PRODUCE"] = len([x for x in w.out])

    # Follower fetches: one request per (replica, ms, topic), incremental
    # sessions (only the partitions that moved).
    by_fetch: dict[tuple[int, int, str], list[dict[str, Any]]] = {}
    for r in fetches:
        t, i = topic_of(r["partition"])
        by_fetch.setdefault((r["replica"], r["ts_ms"], t), []).append(
            {**r, "topic": t, "index": i}
        )
    fetch_lines = 0
    for (replica, ts, topic), rows in sorted(by_fetch.items()):
        if by_name:
            version = int(rng.integers(12, 18))
        else:
            version = 12 if topic == "orders" else int(rng.integers(13, 18))
        connection, correlation = _fetch(
            w, replica, ts, topic, rows, version, rng, errors={}
        )
        fetch_lines += 1
        for r in rows:
            events.append(
                {
                    "ts_ms": ts,
                    "partition": key(topic, r["index"]),
                    "kind": "fetch",
                    "required_offset": None,
                    "timeout_ms": None,
                    "replica": replica,
                    "fetch_offset": r["fetch_offset"],
                    "key": (connection, correlation),
                    "request_partitions": None,
                    "remote_time_ms": None,
                    "broker_error_code": None,
                    "client_id": f"broker-{replica}-fetcher-0",
                    "api_version": version,
                }
            )
    # A follower fetch the leader refused: its offset must not be imported.
    replica0 = fetches[0]["replica"]
    bad = [{"topic": "orders", "index": 0, "fetch_offset": 10**12}]
    _fetch(w, replica0, end_ms, "orders", bad, 12, rng, errors={0: 6})
    skipped["fetch error 6 NOT_LEADER_OR_FOLLOWER"] += 1
    # Consumers: replica -1, or no replicaState at all on v15+.
    for n in range(20):
        version = 12 + n % 6
        request: dict[str, Any] = {
            "maxWaitMs": 500,
            "minBytes": 1,
            "topics": [
                {"topic": "orders", "partitions": [{"partition": 0, "fetchOffset": n}]}
            ],
        }
        if version <= 14:
            request["replicaId"] = -1
        if version >= 13:
            request["topics"][0] = {
                "topicId": TOPIC_IDS["orders"],
                "partitions": [{"partition": 0, "fetchOffset": n}],
            }
        w.line(
            start_ms + 7 * n,
            500_000,
            _header(1, "FETCH", version, "consumer-1"),
            request,
            {"errorCode": 0, "responses": []},
            "10.0.0.1:9092-10.0.3.1:51000-0",
        )
    counts["consumer fetches"] = 20
    counts["follower fetches"] = fetch_lines + 1
    # Other APIs and garbage.
    for n in range(4):
        w.line(
            start_ms + n,
            0,
            _header(3, "METADATA", 12, "producer-1"),
            {"topics": None},
            {"brokers": []},
            "10.0.0.1:9092-10.0.1.1:41000-0",
        )
        w.line(
            start_ms + n,
            0,
            _header(18, "API_VERSIONS", 3, "producer-1"),
            {},
            {"errorCode": 0},
            "10.0.0.1:9092-10.0.1.1:41000-0",
        )
    counts["METADATA"] = counts["API_VERSIONS"] = 4
    lines = [text for _, _, text in sorted(w.out)]
    garbage = [
        f"[{_stamp(start_ms)}] INFO [SocketServer listenerType=BROKER, nodeId=1] "
        "Started socket server acceptors (kafka.network.SocketServer)",
        "",
        "\tat kafka.network.Processor.run(SocketServer.scala:1011)",
        f"[{_stamp(start_ms)}] TRACE [KafkaApi-1] Handling request "
        "(kafka.server.KafkaApis)",
    ]
    broken = [
        f"[{_stamp(start_ms + 1)}] DEBUG Completed request:"
        '{"requestHeader":{"requestApiKey":0,"requestApi',
        "DEBUG Completed request:" + lines[0].split("Completed request:", 1)[1],
    ]
    counts["other lines"] = len(garbage)
    counts["unparseable"] = len(broken)
    skipped["unparseable request-log line"] += len(broken)
    step = max(1, len(lines) // 8)
    for n, extra in enumerate(garbage + broken):
        lines.insert(min(len(lines), (n + 1) * step), extra)
    return GeneratedLog(
        lines,
        events,
        skipped,
        reference,
        counts,
        dict((v, k) for k, v in TOPIC_IDS.items()),
    )


def _fetch(
    w: _Writer,
    replica: int,
    ts: int,
    topic: str,
    rows: list[dict[str, Any]],
    version: int,
    rng: np.random.Generator,
    errors: dict[int, int],
) -> tuple[str, int]:
    topic_field = {"topicId": TOPIC_IDS[topic]} if version >= 13 else {"topic": topic}
    request: dict[str, Any] = {
        "maxWaitMs": 500,
        "minBytes": 1,
        "maxBytes": 10485760,
        "isolationLevel": 0,
        "sessionId": 1000 + replica,
        "sessionEpoch": int(ts % 1000),
        "topics": [
            {
                **topic_field,
                "partitions": [
                    {
                        "partition": r["index"],
                        "currentLeaderEpoch": 3,
                        "fetchOffset": r["fetch_offset"],
                        "lastFetchedEpoch": 3,
                        "logStartOffset": 0,
                        "partitionMaxBytes": 1048576,
                    }
                    for r in rows
                ],
            }
        ],
        "forgottenTopicsData": [],
        "rackId": "",
    }
    if version >= 15:
        request["replicaState"] = {"replicaId": replica, "replicaEpoch": 7}
    else:
        request["replicaId"] = replica
    response = {
        "throttleTimeMs": 0,
        "errorCode": 0,
        "sessionId": 1000 + replica,
        "responses": [
            {
                **topic_field,
                "partitions": [
                    {
                        "partitionIndex": r["index"],
                        "errorCode": errors.get(r["index"], 0),
                        "highWatermark": r["fetch_offset"],
                        "recordsSizeInBytes": 0,
                    }
                    for r in rows
                ],
            }
        ],
    }
    connection = f"10.0.0.{LEADER}:9092-10.0.0.{replica}:3{replica}000-0"
    header = _header(1, "FETCH", version, f"broker-{replica}-fetcher-0")
    remote = int(rng.integers(0, 500_000))
    return connection, w.line(ts, remote, header, request, response, connection)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output", help="a .log.gz file to write")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    log = generate(args.requests, args.partitions, seed=args.seed)
    with gzip.open(args.output, "wt", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in log.lines)


if __name__ == "__main__":
    main()
