"""The replay engine's compiled event loop (``spark/_replay.pyx``) and its reference.

``spark/_replay_py.py`` is the reference: the same names, in Python.  Every
parity test replays the same events twice in one process, once through
each loop (selected by setting ``_engine_sim._loop``), with ``check=True``
(purgatory invariants, nothing left pending, sampled sizes equal the
computed ones), and requires identical outputs, row for row: generated
traces (several seeds, one timeout or a sweep, fixed ISR or lag timers) and
random ones (Hypothesis).
The compiled ``DelayedProduce`` fields (``_kafka._ProduceCore``) are
checked against its twin ``_kafka_py._ProduceCore``.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tickwheel.spark import _engine_sim, _replay_py, engine  # noqa: E402
from tickwheel.spark.trace import EVENT_SCHEMA, generate_trace  # noqa: E402

pytestmark = [pytest.mark.c_extension, pytest.mark.replay]

KEY = [
    ("partition", "ascending"),
    ("timeout_ms", "ascending"),
    ("request_id", "ascending"),
]


@pytest.fixture(autouse=True)
def _compiled_loop() -> None:
    if _engine_sim._loop is _replay_py:
        pytest.fail(
            "the compiled replay loop was not selected (tickwheel.spark._replay)"
        )


def both_loops(table: Any, **kw: Any) -> tuple[Any, Any]:
    compiled = engine.replay_table(table, check=True, **kw)
    saved = _engine_sim._loop
    _engine_sim._loop = _replay_py
    try:
        reference = engine.replay_table(table, check=True, **kw)
    finally:
        _engine_sim._loop = saved
    return compiled, reference


def assert_same(compiled: Any, reference: Any) -> None:
    # Row for row, in the order the engine yields them (completion order).
    assert compiled.outcomes.equals(reference.outcomes)
    assert compiled.purgatory_size.equals(reference.purgatory_size)
    assert compiled.rejected.equals(reference.rejected)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"timeout_ms": 250},
        {"timeout_ms": 0},
        {"timeout_ms": [5_000, 200, 0, 1]},
        {"timeout_ms": 20, "replica_lag_max_ms": 50},
        {"timeout_ms": [3_000, 30], "replica_lag_max_ms": 50},
        {"timeout_ms": [2_000, 0], "replica_lag_max_ms": 1},
        {"timeout_ms": [3_000, 200], "replica_lag_max_ms": 300},
    ],
    ids=[
        "row-timeouts",
        "one-timeout",
        "timeout-0",
        "sweep",
        "lag",
        "lag-sweep",
        "lag-1ms",
        "lag-300ms",
    ],  # fmt: skip
)
@pytest.mark.parametrize("seed", [3, 17, 29])
def test_compiled_loop_matches_reference_on_generated_traces(kw, seed):
    table = generate_trace(4_000, 7, seed=seed, rate_per_s=800.0)
    compiled, reference = both_loops(table, **kw)
    timeouts = kw.get("timeout_ms")
    n_settings = len(timeouts) if isinstance(timeouts, list) else 1
    assert compiled.outcomes.num_rows == 4_000 * n_settings
    assert_same(compiled, reference)
    # Something completed and something expired, or the comparison is weak.
    outcomes = set(compiled.outcomes.column("outcome").to_pylist())
    if kw.get("timeout_ms") != 0:
        assert outcomes == {"completed", "expired"}


# A partition's events: (dt, kind, a, b) with kind 0 = fetch (a = replica,
# b = fetch_offset) and 1 = produce (b = required_offset, a timeout).
_event = st.tuples(
    st.integers(0, 40),
    st.integers(0, 1),
    st.integers(0, 3),
    st.integers(0, 30),
    st.integers(0, 60),
)


@settings(max_examples=150, deadline=None)
@given(
    partitions=st.lists(
        st.lists(_event, min_size=1, max_size=40), min_size=1, max_size=3
    ),
    fixed=st.sampled_from([None, 0, 25, [30, 5]]),
    lag=st.sampled_from([None, 1, 7, 40]),
)
def test_compiled_loop_matches_reference_on_random_traces(partitions, fixed, lag):
    rows: list[dict[str, Any]] = []
    rid = 0
    for p, events in enumerate(partitions):
        ts = 0
        for dt, kind, a, b, timeout in events:
            ts += dt
            if kind == 0:
                rows.append(dict(ts_ms=ts, partition=f"p{p}", kind="fetch",
                                 replica=a, fetch_offset=b))  # fmt: skip
            else:
                rid += 1
                rows.append(dict(ts_ms=ts, partition=f"p{p}", kind="produce",
                                 request_id=rid, required_offset=b,
                                 timeout_ms=timeout))  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)
    compiled, reference = both_loops(table, timeout_ms=fixed, replica_lag_max_ms=lag)
    n_settings = len(fixed) if isinstance(fixed, list) else 1
    assert compiled.outcomes.num_rows == rid * n_settings
    assert_same(compiled, reference)


def test_lag_parity_exercises_isr_changes():
    # The lag cases above compare something only if the ISR moves.
    table = generate_trace(4_000, 7, seed=3, rate_per_s=800.0)
    shrinks = []
    original = engine._PartitionReplay.finish

    def finish(self: Any) -> None:
        shrinks.append((self.shrinks, self.rejoins))
        original(self)

    engine._PartitionReplay.finish = finish  # type: ignore[method-assign]
    try:
        engine.replay_table(table, timeout_ms=2_000, replica_lag_max_ms=50)
    finally:
        engine._PartitionReplay.finish = original  # type: ignore[method-assign]
    assert sum(s for s, _ in shrinks) > 0 and sum(r for _, r in shrinks) > 0


def test_reference_has_the_compiled_loops_names_and_docstrings():
    from tickwheel.spark import _replay

    names = set(_replay_py.__all__)
    compiled = {n for n in dir(_replay) if not n.startswith("_")}
    assert names <= compiled, names - compiled
    for name in names:
        assert inspect.getdoc(getattr(_replay, name)) == inspect.getdoc(
            getattr(_replay_py, name)
        ), name
    for method in ("push", "smallest", "pop_up_to"):
        assert inspect.getdoc(getattr(_replay.OffsetHeap, method)) == inspect.getdoc(
            getattr(_replay_py.OffsetHeap, method)
        ), method


@pytest.mark.parametrize("loop", ["compiled", "reference"])
def test_offset_heap_pops_in_order_up_to_the_high_watermark(loop):
    from tickwheel.spark import _replay

    heap = (_replay if loop == "compiled" else _replay_py).OffsetHeap()
    assert not heap and len(heap) == 0
    with pytest.raises(IndexError):
        heap.smallest()
    for offset in [50, 7, 7, 300, 2**62, 0, 99]:
        heap.push(offset)
    assert len(heap) == 7 and heap.smallest() == 0
    heap.pop_up_to(7)
    assert len(heap) == 4 and heap.smallest() == 50
    heap.pop_up_to(49)
    assert heap.smallest() == 50
    heap.pop_up_to(float("inf"))
    assert not heap


@pytest.mark.parametrize("loop", ["compiled", "reference"])
def test_run_rejects_columns_of_different_lengths(loop):
    from tickwheel.spark import _replay

    module = _replay if loop == "compiled" else _replay_py
    replay = engine._PartitionReplay("p", [1], [None], None, 0, loop=module)
    i64 = np.zeros(2, dtype=np.int64)
    u8 = np.zeros(2, dtype=np.uint8)
    with pytest.raises(ValueError, match="same length"):
        module.run(replay, engine.ReplayProduce, i64, u8, i64, i64, i64[:1])
    replay.finish()


def test_compiled_run_rejects_bad_arguments():
    from tickwheel.spark import _replay

    replay = engine._PartitionReplay("p", [1], [None], None, 0)
    i64 = np.zeros(2, dtype=np.int64)
    u8 = np.zeros(2, dtype=np.uint8)
    with pytest.raises(TypeError, match="produce_type"):
        _replay.run(replay, int, i64, u8, i64, i64, i64)
    other = engine._PartitionReplay("p", [1], [None], None, 0, loop=_replay_py)
    with pytest.raises(TypeError, match="OffsetHeap"):
        _replay.run(other, engine.ReplayProduce, i64, u8, i64, i64, i64)
    other.finish()
    replay.finish()


@pytest.mark.parametrize("loop", ["compiled", "reference"])
def test_recorder_appends_request_id_done_ms_and_expired(loop):
    from tickwheel import MockTimer
    from tickwheel.kafka import DelayedProduce, Partition
    from tickwheel.purgatory import DelayedOperationPurgatory
    from tickwheel.spark import _replay

    _replay = _replay if loop == "compiled" else _replay_py  # noqa: PLW2901
    ids: list[int] = []
    done: list[int] = []
    expired: list[bool] = []
    record = _replay.recorder(ids, done, expired)
    timer = MockTimer()
    purgatory = DelayedOperationPurgatory("rec", timer)
    part = Partition("p", [1])
    clock = lambda: timer.now_ms  # noqa: E731
    a = DelayedProduce(part, 5, 10, clock=clock, callback=record, request_id=7)
    b = DelayedProduce(part, 9, 10, clock=clock, callback=record, request_id=8)
    assert not purgatory.try_complete_else_watch(a, a.keys)
    assert not purgatory.try_complete_else_watch(b, b.keys)
    timer.advance_clock(3)
    part.record_fetch(1, 5)
    assert purgatory.check_and_complete("p") == 1
    timer.advance_clock(20)
    assert (ids, done, expired) == ([7, 8], [3, 10], [False, True])

    class Plain:  # any object with the three attributes
        request_id, done_ms, expired = 1, 2, True

    record(Plain())
    assert (ids[-1], done[-1], expired[-1]) == (1, 2, True)


def test_delayed_produce_uses_the_compiled_fields():
    from tickwheel import _kafka, kafka

    assert kafka._ProduceCore is _kafka._ProduceCore
    assert issubclass(kafka.DelayedProduce, _kafka._ProduceCore)
    assert issubclass(engine.ReplayProduce, _kafka._ProduceCore)
    assert kafka.COMPLETED is _kafka.COMPLETED
    assert kafka.EXPIRED is _kafka.EXPIRED
    assert kafka.REQUEST_TIMED_OUT is _kafka.REQUEST_TIMED_OUT


def test_produce_core_twins_behave_alike(timers):
    # The same operation on both DelayedProduce cores (_kafka and _kafka_py,
    # through the timers fixture's package): try_complete only when every
    # in-sync follower has the offset; on_complete records the outcome.
    kafka, MockTimer = timers.kafka, timers.MockTimer
    base = kafka._ProduceCore

    class Produce(kafka._Outcome, base):  # type: ignore[misc, valid-type]
        __slots__ = ()

    seen: list[Any] = []
    timer = MockTimer()
    part = kafka.Partition("p", [1, 2])
    op = Produce(10)
    op.partition, op.required_offset, op.timeout_ms, op.arrival_ms = part, 4, 10, 0
    op._clock, op._callback = (lambda: timer.now_ms), seen.append
    # (Set, as __init__ does: before that, a pure slot is unset, a C field None.)
    op.done_ms = op.outcome = op.error = None
    part.record_fetch(1, 4)
    assert op.try_complete() is False and not op.completed
    part.record_fetch(2, 4)
    timer.advance_clock(6)
    assert op.try_complete() is True
    assert (op.outcome, op.error, op.done_ms, op.latency_ms) == (
        "completed",
        None,
        6,
        6,
    )
    assert seen == [op] and op.try_complete() is False
    late = Produce(3)
    late.partition, late.required_offset, late.arrival_ms = part, 99, 6
    late.timeout_ms, late._clock, late._callback = 3, (lambda: 9), None
    late.done_ms = late.outcome = late.error = None
    late.run()  # the timer's expiry path
    assert (late.outcome, late.error, late.done_ms) == (
        "expired",
        "REQUEST_TIMED_OUT",
        9,
    )


@pytest.mark.parametrize("now_ns", [0, 1, 999_999, 1_000_000, 7_500_000, -1, -1_000_000,
                                    -1_000_001, 2**62, -(2**62)])  # fmt: skip
@pytest.mark.parametrize("loop", ["compiled", "reference"])
def test_clock_reads_the_timers_now_ms(now_ns, loop):
    from tickwheel import MockTimer
    from tickwheel.spark import _replay

    _replay = _replay if loop == "compiled" else _replay_py  # noqa: PLW2901
    timer = MockTimer()
    clock = _replay.clock(timer)
    timer.now_ns = now_ns
    assert clock() == timer.now_ms == now_ns // 1_000_000
    with pytest.raises(TypeError):
        _replay.clock(object())  # type: ignore[arg-type]


def test_compiled_run_needs_manual_clock_timers():
    from tickwheel import SystemTimer
    from tickwheel.spark import _replay

    replay = engine._PartitionReplay("p", [1], [None], None, 0)
    real = SystemTimer(name="not-manual", reaper=False)
    replay.settings[0].timer, saved = real, replay.settings[0].timer
    i64 = np.zeros(1, dtype=np.int64)
    try:
        with pytest.raises(TypeError, match="MockTimer"):
            _replay.run(
                replay, engine.ReplayProduce, i64, np.zeros(1, np.uint8), i64, i64, i64
            )
    finally:
        real.close()
        replay.settings[0].timer = saved
        replay.finish()
