"""Every compiled module and its pure-Python twin expose the same API and docs.

The pairs are those ``tickwheel._impl`` chooses between (``_impl.COMPILED``):
the same ``__all__`` and constants, the same classes (members, docstrings,
attribute kinds, parameter names), and the same docstrings and parameters for
every function both define (a ``cdef`` function has no Python face to compare).
The selection itself is tested at the end: all compiled, and all-or-nothing
when part of a build is missing.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

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


PAIRS = [
    (name, f"{name}_py") for name in ("_wheel", "_purgatory", "_kafka", "spark._replay")
]
# Classes only one side has, and why.
ONLY_COMPILED = {
    # The compiled purgatory's lock; the twin uses threading.Lock, whose
    # behaviour _Lock copies (tests/test_purgatory_lock.py).
    ("_purgatory", "_Lock"),
    # A lane of a laned compiled timer (TimerCore._use_lanes); the twin's
    # _use_lanes keeps one lane.
    ("_wheel", "_Lane"),
}
# Classes both sides define whose members are not compared: the compiled
# replay loop's methods are cdef (invisible from Python) and its state is C
# fields; the loops' outputs are compared row for row in test_replay_loop.py.
MEMBERS_NOT_COMPARED = {
    ("_replay", "_Loop"),
}


def _defined(module: ModuleType, kind: Callable[[object], bool]) -> dict[str, Any]:
    # Defined in the module, or for a twin split in a package (``_wheel_py``)
    # in one of its modules.
    def _here(obj: object) -> bool:
        where = getattr(obj, "__module__", None) or ""
        return where == module.__name__ or where.startswith(f"{module.__name__}.")

    return {
        name: obj
        for name, obj in vars(module).items()
        if kind(obj) and _here(obj) and not name.startswith("__")
    }


def _is_function(obj: object) -> bool:
    return callable(obj) and not isinstance(obj, type)


@pytest.fixture(scope="module", params=PAIRS, ids=[c for c, _ in PAIRS])
def pair(request: pytest.FixtureRequest) -> tuple[ModuleType, ModuleType]:
    c_name, py_name = request.param
    return (
        importlib.import_module(f"tickwheel.{c_name}"),
        importlib.import_module(f"tickwheel.{py_name}"),
    )


def test_same_module_names(pair):
    c, py = pair
    assert sorted(c.__all__) == sorted(py.__all__)
    for name in py.__all__:
        assert hasattr(c, name), name
        if not callable(getattr(py, name)):  # constants: the same values
            assert getattr(c, name) == getattr(py, name), name


def test_same_classes(pair):
    c, py = pair
    c_classes, py_classes = _defined(c, inspect.isclass), _defined(py, inspect.isclass)
    short = c.__name__.rpartition(".")[2]
    only_c = {name for name in c_classes if (short, name) in ONLY_COMPILED}
    assert sorted(set(c_classes) - only_c) == sorted(py_classes)
    for name, py_cls in py_classes.items():
        if (short, name) not in MEMBERS_NOT_COMPARED:
            _assert_twins(c_classes[name], py_cls, f"{short}.{name}")


def test_same_functions_where_both_define_one(pair):
    c, py = pair
    c_funcs, py_funcs = _defined(c, _is_function), _defined(py, _is_function)
    shared = sorted(set(c_funcs) & set(py_funcs))
    for name in shared:
        assert inspect.getdoc(c_funcs[name]) == inspect.getdoc(py_funcs[name]), name
        c_sig, py_sig = (
            inspect.signature(c_funcs[name]),
            inspect.signature(py_funcs[name]),
        )
        assert list(c_sig.parameters) == list(py_sig.parameters), name


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
def test_constructors_accept_the_twins_keywords(name, positional):
    # Beyond the signatures (compared above), the behaviour:
    # every keyword the twin accepts, with its default, works on the C class.
    from tickwheel import _wheel, _wheel_py

    py_sig = inspect.signature(getattr(_wheel_py, name))
    kwargs = {
        p.name: p.default
        for p in py_sig.parameters.values()
        if p.default is not p.empty and p.kind is not p.POSITIONAL_ONLY
    }
    for module in (_wheel, _wheel_py):
        getattr(module, name)(*positional, **kwargs)


def _shape(obj: Any) -> list[tuple[str, Any, str]]:
    """Parameter names, kinds and defaults (annotations differ: C has none).

    ``self`` is left out: a C slot's is positional-only (``$self``).
    """
    params = list(inspect.signature(obj).parameters.values())
    if params and params[0].name == "self":
        del params[0]
    # A sentinel default is a different object in the twin package's copy.
    return [
        (p.name, p.kind, re.sub(r" at 0x[0-9a-f]+", "", repr(p.default)))
        for p in params
    ]


def test_compiled_classes_have_the_twins_signatures(pair):
    # Without a text signature, inspect.signature raises "no signature found
    # for builtin type" for a compiled class, and help() shows
    # (*args, **kwargs).
    c, py = pair
    for name, c_cls in _defined(c, inspect.isclass).items():
        py_cls = getattr(py, name, None)
        if py_cls is None:
            # _Lock: threading.Lock's constructor; _Lane: a TimerCore's.
            expected = _shape(py.TimerCore) if name == "_Lane" else []
            assert _shape(c_cls) == expected, name
            continue
        assert _shape(c_cls) == _shape(py_cls), name
        assert "--" not in (c_cls.__doc__ or ""), name  # the marker is not doc


def test_compiled_classes_show_no_cython_internals(pair):
    # help() listed __reduce_cython__/__setstate_cython__ on every class
    # (Cython's auto_pickle, now off: the nodes never pickled anyway).
    import pickle

    c, _ = pair
    for name, c_cls in _defined(c, inspect.isclass).items():
        assert [m for m in dir(c_cls) if "cython" in m] == [], name
    if c.__name__ == "tickwheel._wheel":
        with pytest.raises(TypeError, match="cannot pickle"):
            pickle.dumps(c.TimerTask(5))


# The public modules, each compared with its copy built on the twins.
PUBLIC_MODULES = [
    "",
    "timer",
    "purgatory",
    "kafka",
    "compat_threading",
    "compat_sched",
    "compat_asyncio",
]


def _public_callables(module: ModuleType) -> dict[str, Any]:
    found = {}
    for name in module.__all__:
        obj = getattr(module, name)
        if not callable(obj):
            continue
        found[name] = obj
        if isinstance(obj, type):
            for member in dir(obj):
                if member.startswith("_") and member != "__init__":
                    continue
                attr = inspect.getattr_static(obj, member)
                if callable(attr) and not isinstance(attr, type):
                    found[f"{name}.{member}"] = getattr(obj, member)
    return found


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m or "tickwheel")
def test_public_signatures_are_the_same_on_both_cores(module):
    # Every public class, function and method: the same parameters whether
    # the compiled core or the twins are underneath (IDEs, help(), inspect).
    from twins import twin_package

    compiled = importlib.import_module(f"tickwheel.{module}".rstrip("."))
    pure = twin_package()
    for part in filter(None, module.split(".")):
        pure = getattr(pure, part)
    c_names, py_names = _public_callables(compiled), _public_callables(pure)
    assert sorted(c_names) == sorted(py_names)
    for name, c_obj in c_names.items():
        if name.endswith(".__init__") and c_obj is object.__init__:
            continue
        assert _shape(c_obj) == _shape(py_names[name]), name


def test_partition_core_field_on_both_sides():
    from tickwheel import _kafka, _kafka_py

    for core in (_kafka._PartitionCore, _kafka_py._PartitionCore):
        part = core()
        part._acked_to = 7
        assert part._acked_to == 7


def test_new_produce_on_both_sides():
    # _new_produce builds the operation the replay loop completes: every
    # field set, the rest as __init__ leaves it.
    from tickwheel import _kafka, _kafka_py

    for module in (_kafka, _kafka_py):

        class Produce(module._ProduceCore):  # type: ignore[misc, name-defined]
            pass

        part = module._PartitionCore()
        part._acked_to = 3
        seen: list[Any] = []
        op = module._new_produce(Produce, part, 3, 100, 5, "r", lambda: 9, seen.append)
        assert (op.partition, op.required_offset, op.timeout_ms, op.delay_ms) == (
            part,
            3,
            100,
            100,
        )
        assert (op.arrival_ms, op.request_id, op.done_ms, op.outcome) == (
            5,
            "r",
            None,
            None,
        )
        assert not op._op_done and op._op_trylock
        assert op.try_complete() and seen == [op]
        assert (op.outcome, op.error, op.done_ms) == (module.COMPLETED, None, 9)
        with pytest.raises(TypeError):
            module._new_produce(int, part, 3, 1, 0, None, int, None)


# -- the selection: _impl ---------------------------------------------------------
def test_impl_selects_every_compiled_module():
    import tickwheel
    from tickwheel import _impl, _kafka, _purgatory, _wheel, kafka, purgatory, timer

    assert _impl.USE_EXTENSIONS and tickwheel.USE_EXTENSIONS
    assert _impl.core is _wheel and _impl.select("_wheel") is _wheel
    assert _impl.select("_purgatory") is _purgatory
    assert _impl.select("_kafka") is _kafka
    assert purgatory.DelayedOperation is _purgatory.DelayedOperation
    assert issubclass(purgatory.DelayedOperationPurgatory, _purgatory._PurgatoryCore)
    assert issubclass(timer.MockTimer, _wheel.TimerCore)
    assert issubclass(kafka.DelayedProduce, _kafka._ProduceCore)
    assert issubclass(kafka.Partition, _kafka._PartitionCore)


def test_twin_package_is_built_on_every_twin():
    from twins import twin_package

    from tickwheel import _kafka_py, _purgatory_py, _wheel_py

    pure = twin_package()
    assert pure is twin_package()  # built once
    assert not pure.USE_EXTENSIONS and pure._impl.core is _wheel_py
    assert pure.TimerTask is _wheel_py.TimerTask  # the twins are shared
    assert pure.purgatory.DelayedOperation is _purgatory_py.DelayedOperation
    assert issubclass(pure.MockTimer, _wheel_py.TimerCore)
    assert issubclass(pure.kafka.DelayedProduce, _kafka_py._ProduceCore)
    import tickwheel

    assert tickwheel.purgatory is not pure.purgatory  # the import is untouched


def _run(code: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TICKWHEEL_NO_EXTENSIONS"}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env)


# After the selection, the classes in use all come from the twins.
_ALL_TWINS = (
    "from tickwheel import _impl, kafka, purgatory\n"
    "import tickwheel\n"
    "assert not tickwheel.USE_EXTENSIONS and _impl.core.__name__.endswith('_py')\n"
    "assert purgatory.DelayedOperation.__module__ == 'tickwheel._purgatory_py'\n"
    "assert kafka.DelayedProduce.__mro__[2].__module__ == 'tickwheel._kafka_py'\n"
    "assert tickwheel.MockTimer.__mro__[1].__module__ == 'tickwheel._wheel_py.core'\n"
    "assert _impl.select('_purgatory').__name__ == 'tickwheel._purgatory_py'\n"
    "class Op(purgatory.DelayedOperation):\n"
    "    def try_complete(self):\n"
    "        return False\n"
    "timer = tickwheel.MockTimer()\n"
    "p = purgatory.DelayedOperationPurgatory('fallback', timer)\n"
    "op = Op(10)\n"
    "assert not p.try_complete_else_watch(op, ['k'])\n"
    "timer.advance_clock(10)\n"
    "assert op.expired and p.delayed == 0\n"
)


@pytest.mark.parametrize("missing", ["_purgatory", "_kafka"])
def test_partial_build_warns_and_selects_every_twin(missing):
    # Some compiled modules load, one does not (a partial or stale build):
    # a RuntimeWarning names it, and nothing compiled is mixed in.
    _run(
        "import sys, warnings\n"
        f"sys.modules['tickwheel.{missing}'] = None\n"
        "with warnings.catch_warnings(record=True) as rec:\n"
        "    warnings.simplefilter('always')\n"
        "    import tickwheel\n"
        "msgs = [str(w.message) for w in rec if w.category is RuntimeWarning]\n"
        f"assert len(msgs) == 1 and 'but {missing} did not' in msgs[0], msgs\n"
        "assert 'Rebuild tickwheel' in msgs[0]\n" + _ALL_TWINS
    )


def test_pure_install_selects_every_twin_quietly():
    # No compiled module at all (a pure-Python wheel): no warning.
    _run(
        "import sys, warnings\n"
        "sys.modules['tickwheel._wheel'] = None\n"
        "warnings.simplefilter('error')\n"
        "import tickwheel\n" + _ALL_TWINS
    )
