"""Run the docstring examples of every module, the compiled core included."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

MODULES = [
    pytest.param("tickwheel._wheel", marks=pytest.mark.c_extension),
    "tickwheel._wheel_py",
    pytest.param("tickwheel._purgatory", marks=pytest.mark.c_extension),
    "tickwheel._purgatory_py",
    "tickwheel._kafka_py",
    "tickwheel._impl",
    "tickwheel.purgatory",
    "tickwheel.kafka",
    "tickwheel",
    "tickwheel.timer",
    "tickwheel._asyncio_loop",
    # The module docstring and, through __module__, the wheel layer's classes.
    "tickwheel.compat_asyncio",
]


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    module = importlib.import_module(name)
    # A twin split in a package (_wheel_py): each of its modules' examples,
    # with the names the package exports, as the compiled module's run with
    # its own.
    units = [module]
    if hasattr(module, "__path__") and name.endswith("_py"):
        units += [
            importlib.import_module(f"{name}.{info.name}")
            for info in pkgutil.iter_modules(module.__path__)
        ]
    attempted = failed = 0
    for unit in units:
        result = doctest.testmod(
            unit, optionflags=doctest.ELLIPSIS, extraglobs=vars(module)
        )
        attempted += result.attempted
        failed += result.failed
    assert attempted > 0, f"{name} has no examples"
    assert failed == 0
