"""The compiled core and its pure-Python twin expose the same API and docs."""

from __future__ import annotations

import inspect

import pytest

pytestmark = pytest.mark.c_extension


def _is_attribute(obj: object) -> bool:
    return isinstance(obj, property) or inspect.isdatadescriptor(obj)


def _public(cls: type) -> dict[str, object]:
    names = {}
    for name in dir(cls):
        if name.startswith("__") or (name.startswith("_") and name != "_check"):
            continue
        names[name] = inspect.getattr_static(cls, name)
    return names


def _assert_twins(c_cls: type, py_cls: type, c_name: str) -> None:
    """Same docstrings, public members, attribute kinds and parameter names."""
    assert inspect.getdoc(c_cls) == inspect.getdoc(py_cls)
    c_members, py_members = _public(c_cls), _public(py_cls)
    assert sorted(c_members) == sorted(py_members)
    for member, py_obj in py_members.items():
        c_obj = c_members[member]
        assert inspect.getdoc(c_obj) == inspect.getdoc(py_obj), f"{c_name}.{member}"
        assert _is_attribute(c_obj) == _is_attribute(py_obj), member
        if not _is_attribute(py_obj):
            py_sig = inspect.signature(py_obj)
            c_sig = inspect.signature(c_obj)
            assert list(c_sig.parameters) == list(py_sig.parameters), (
                f"{c_name}.{member}"
            )


@pytest.fixture(scope="module")
def pair():
    from tickwheel import _wheel, _wheel_py

    return _wheel, _wheel_py


def test_same_module_names(pair):
    c, py = pair
    assert sorted(c.__all__) == sorted(py.__all__)
    for name in py.__all__:
        assert hasattr(c, name), name
    for const in ("DEFAULT_TICK_MS", "DEFAULT_WHEEL_SIZE", "MAX_DELAY_MS"):
        assert getattr(c, const) == getattr(py, const)


@pytest.mark.parametrize(
    "name",
    [
        "TaskCounter",
        "TimerTaskEntry",
        "TimerTask",
        "TimerTaskList",
        "DelayQueue",
        "TimingWheel",
        "TimerCore",
    ],
)
def test_same_members_docs_and_signatures(pair, name):
    _assert_twins(getattr(pair[0], name), getattr(pair[1], name), name)


@pytest.mark.parametrize(
    "name, positional",
    [
        ("TimerTask", (10,)),
        ("TimingWheel", ()),
        ("TimerCore", ()),
        ("TimerTaskEntry", ()),
        ("TimerTaskList", ()),
    ],
)
def test_constructors_accept_the_twins_keywords(pair, name, positional):
    # Cython slot wrappers carry no signature, so check behaviour instead:
    # every keyword the twin accepts, with its default, works on the C class.
    py_sig = inspect.signature(getattr(pair[1], name))
    kwargs = {
        p.name: p.default
        for p in py_sig.parameters.values()
        if p.default is not p.empty and p.kind is not p.POSITIONAL_ONLY
    }
    for module in pair:
        getattr(module, name)(*positional, **kwargs)


# -- the purgatory's compiled hot paths (_purgatory.pyx) and purgatory.py -------
@pytest.fixture(scope="module")
def purgatory_pair():
    from tickwheel import _purgatory, purgatory

    return _purgatory, purgatory


def test_purgatory_selects_compiled_classes(purgatory_pair):
    c, py = purgatory_pair
    assert py.USE_COMPILED_PURGATORY
    assert py.DelayedOperation is c.DelayedOperation
    assert issubclass(py.DelayedOperationPurgatory, c._PurgatoryCore)


@pytest.mark.parametrize(
    "c_name, py_name",
    [
        ("DelayedOperation", "_PureDelayedOperation"),
        ("_PurgatoryCore", "_PurgatoryCore"),
        ("_Shard", "_Shard"),
    ],
)
def test_purgatory_same_members_docs_and_signatures(purgatory_pair, c_name, py_name):
    _assert_twins(
        getattr(purgatory_pair[0], c_name), getattr(purgatory_pair[1], py_name), c_name
    )


def test_delayed_produce_core_twins():
    # kafka.DelayedProduce's fields and hot methods: _purgatory._ProduceCore
    # (selected) and kafka._PureProduceCore (the reference).
    from tickwheel import _purgatory, kafka

    assert kafka._ProduceCore is _purgatory._ProduceCore
    _assert_twins(_purgatory._ProduceCore, kafka._PureProduceCore, "_ProduceCore")


def test_partition_core_twins():
    # The field try_complete compares: _purgatory._PartitionCore (selected,
    # a C slot) and kafka._PurePartitionCore (the reference).
    from tickwheel import _purgatory, kafka

    assert kafka._PartitionCore is _purgatory._PartitionCore
    assert issubclass(kafka.Partition, _purgatory._PartitionCore)
    _assert_twins(_purgatory._PartitionCore, kafka._PurePartitionCore, "_PartitionCore")
    for core in (_purgatory._PartitionCore, kafka._PurePartitionCore):
        part = core()
        part._acked_to = 7
        assert part._acked_to == 7


def test_purgatory_without_its_extension_warns_and_falls_back():
    # A build with the compiled core but no (or a mismatched) compiled
    # purgatory must say so, not run slower in silence.
    import subprocess
    import sys

    code = (
        "import sys, warnings\n"
        "sys.modules['tickwheel._purgatory'] = None\n"
        "with warnings.catch_warnings(record=True) as rec:\n"
        "    warnings.simplefilter('always')\n"
        "    import tickwheel.purgatory as p\n"
        "assert not p.USE_COMPILED_PURGATORY\n"
        "assert any('compiled purgatory' in str(w.message) for w in rec), rec\n"
        "from tickwheel import MockTimer\n"
        "class Op(p.DelayedOperation):\n"
        "    def try_complete(self):\n"
        "        return False\n"
        "timer = MockTimer()\n"
        "purgatory = p.DelayedOperationPurgatory('fallback', timer)\n"
        "op = Op(10)\n"
        "assert not purgatory.try_complete_else_watch(op, ['k'])\n"
        "timer.advance_clock(10)\n"
        "assert op.expired and purgatory.delayed == 0\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
