"""The benchmarks' way to ``tests/twins.py``: tickwheel built on the twins.

The benchmarks compare the compiled core with its pure-Python twin in one
process, as the tests do; the loader lives with the tests because it
rewrites ``sys.modules``, which the shipped package never does.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "tests" / "twins.py"


def twin_package() -> types.ModuleType:
    """``tests/twins.py``'s :func:`twin_package` (loaded once, by path)."""
    module = sys.modules.get("twins")
    if module is None or getattr(module, "__file__", None) != str(_PATH):
        spec = importlib.util.spec_from_file_location("tickwheel_test_twins", _PATH)
        assert spec is not None and spec.loader is not None
        module = sys.modules.get(spec.name)
        if module is None:
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
    return module.twin_package()
