"""``tickwheel`` built on the pure-Python twins, beside the compiled one.

The tests (and the benchmarks, through ``bench/twins.py``) compare both cores
in one process.  The package chooses its core once, at import
(``tickwheel._impl``), so the other core needs a second copy of the public
modules: :func:`twin_package` imports them again as under
``TICKWHEEL_NO_EXTENSIONS=1`` and puts ``sys.modules`` and ``os.environ``
back as they were.  That rewriting is why it lives here and not in the
shipped package.
"""

from __future__ import annotations

import importlib
import os
import sys
import types

PACKAGE = "tickwheel"

_twin_package: types.ModuleType | None = None


def _shared(name: str, compiled: tuple[str, ...]) -> bool:
    # Twins (and the modules of a twin package) and compiled modules do not
    # depend on the choice: both copies use the same module objects.
    parts = name.split(".")[1:]
    last = name.rsplit(".", 1)[-1]
    twin = any(part.endswith("_py") for part in parts)
    return twin or last in compiled or last == "_version"


def twin_package() -> types.ModuleType:
    """``tickwheel`` built on the twins, for comparing both cores in one process.

    With ``USE_EXTENSIONS`` False this is ``tickwheel`` itself.  Otherwise it
    is a second copy of the public modules (``tickwheel``, ``timer``,
    ``purgatory``, ``kafka``, the compat modules) imported as under
    ``TICKWHEEL_NO_EXTENSIONS=1``; the twin modules themselves are shared,
    so ``twin_package().TimerTask is tickwheel._wheel_py.TimerTask``.  The
    normal ``import tickwheel`` is untouched.  The copy's classes are not
    the ones ``pickle`` finds by name.
    """
    global _twin_package
    from tickwheel import _impl

    if not _impl.USE_EXTENSIONS:
        return importlib.import_module(PACKAGE)
    if _twin_package is not None:
        return _twin_package
    compiled = _impl.COMPILED
    prefix = f"{PACKAGE}."
    saved = {
        name: module
        for name, module in sys.modules.items()
        if name == PACKAGE or name.startswith(prefix)
    }
    for name in saved:
        if not _shared(name, compiled):
            del sys.modules[name]
    previous = os.environ.get("TICKWHEEL_NO_EXTENSIONS")
    os.environ["TICKWHEEL_NO_EXTENSIONS"] = "1"
    try:
        package = importlib.import_module(PACKAGE)
        for name in ("kafka", "compat_asyncio"):
            importlib.import_module(f"{prefix}{name}")
    finally:
        if previous is None:
            del os.environ["TICKWHEEL_NO_EXTENSIONS"]
        else:
            os.environ["TICKWHEEL_NO_EXTENSIONS"] = previous
        fresh = [n for n in sys.modules if n == PACKAGE or n.startswith(prefix)]
        for name in fresh:
            if not _shared(name, compiled):
                del sys.modules[name]
        sys.modules.update(saved)
        for name in fresh:  # twins imported by the copy: bind them as usual
            parent, _, last = name.rpartition(".")
            if name not in saved and name in sys.modules and parent in saved:
                setattr(saved[parent], last, sys.modules[name])
    _twin_package = package
    return package
