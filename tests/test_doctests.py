"""Run the docstring examples of every module, the compiled core included."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    pytest.param("tickwheel._wheel", marks=pytest.mark.c_extension),
    "tickwheel._wheel_py.task",
    "tickwheel._wheel_py.levels",
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
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
