"""The shim over CPython details (``src/tickwheel/_compat.h``) took the right branch.

The compiled core keeps three CPython details, each behind a guard in
``_compat.h`` (the clock read in C, the type's dict for the METH_FASTCALL
``schedule``, the TimerTask freelist in ``tp_alloc``/``tp_free``, off on
free-threaded builds), and the purgatory's GIL-as-mutex lock, guarded at
import; docs/design.md ("CPython internals") has what each is worth.  These
tests recompute each decision from the running interpreter and compare it
with what the build reports, so a guard that picks the wrong branch on some
CPython fails here; and they fail loudly on a CPython the guards were never
checked against.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.c_extension

HEADER = Path(__file__).resolve().parents[1] / "src" / "tickwheel" / "_compat.h"

# The CPythons _compat.h's guards were built and tested on (3.9 to 3.13;
# 3.14 takes the same branches as 3.13).  3.15.2's headers were checked:
# PyTime_MonotonicRaw, PyType_GetDict, PyWeakref_GetRef, the tp_alloc/tp_free
# slots, PyType_GenericAlloc, PyObject_Init/Free/GC_Del and
# Py_TPFLAGS_MANAGED_DICT/WEAKREF are unchanged; PyWeakref_GetObject, used
# only below 3.13, is gone.  A newer one must be checked by hand (its public
# API may have changed) before it is added.
CHECKED = ((3, 10), (3, 11), (3, 12), (3, 13), (3, 14), (3, 15))


def test_compat_shim_python_is_checked() -> None:
    assert sys.implementation.name == "cpython"
    assert sys.version_info[:2] in CHECKED, (
        f"CPython {sys.version_info[:2]} is not one _compat.h's version guards "
        f"were checked against ({CHECKED}): review src/tickwheel/_compat.h and "
        "docs/design.md 'CPython internals', then add it to CHECKED"
    )


def test_compat_shim_decisions() -> None:
    from tickwheel import _wheel

    got = _wheel._compat()
    if sys.platform.startswith("linux"):
        clock = "clock_gettime"
    elif sys.version_info >= (3, 13):
        clock = "PyTime_MonotonicRaw"
    else:
        clock = "time.monotonic_ns"
    assert got == {
        "clock": clock,
        "c_clock": clock != "time.monotonic_ns",
        "type_dict": "PyType_GetDict" if sys.version_info >= (3, 12) else "tp_dict",
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "freelist": (
            "none"
            if sysconfig.get_config_var("Py_GIL_DISABLED")
            else "tp_alloc/tp_free"
        ),
        "type_version": (
            "tp_version_tag" if sys.version_info >= (3, 13) else "tp_version_tag+flag"
        ),
        # TimerTask's own tp_dealloc comes with the freelist.
        "task_dealloc": (
            "cython" if sysconfig.get_config_var("Py_GIL_DISABLED") else "tickwheel"
        ),
        # GCC and Clang have 128-bit integers on 64-bit targets; MSVC does not.
        "division": (
            "multiply-high"
            if sys.maxsize > 2**32 and not sys.platform.startswith("win")
            else "divide"
        ),
    }


def test_compat_shim_division_by_a_reciprocal_is_exact() -> None:
    # _wheel_link divides offsets below 2**32 by a level's tick with a
    # multiply-high by ceil(2**64 / tick); check it where it could go wrong:
    # around multiples of the divisor, at the top of the range, for ticks
    # of every size (powers of two, wheel_size powers, past 2**32).
    from tickwheel import _wheel

    top = 2**32 - 1
    divisors = [2, 3, 7, 20, 400, 8_000, 160_000, 3_200_000, 64_000_000,
                2**31 - 1, 2**31, 2**31 + 1, 2**32 - 5, 2**32 - 1, 2**32,
                2**32 + 1, 2**40, 2**62]
    for d in divisors:
        ns = {0, 1, top, top - 1, top - d % 2**32, d - 1, d, d + 1}
        for q in (1, 2, 3, top // d, top // d - 1):
            ns.update({q * d - 1, q * d, q * d + 1})
        for n in sorted(x for x in ns if 0 <= x <= top):
            assert _wheel._div_by_recip(n, d) == n // d, (n, d)


def test_compat_shim_clock_matches_time_monotonic_ns() -> None:
    # The C clock must read the clock time.monotonic_ns() reads: the timer
    # mixes the two (deadlines from one, a driver's sleeps from the other).
    import time

    from tickwheel import _wheel

    core = _wheel.TimerCore()
    before = time.monotonic_ns()
    now = core.now_ns
    after = time.monotonic_ns()
    assert before <= now <= after


def test_compat_shim_fastcall_schedule_installed() -> None:
    # The METH_FASTCALL descriptors replaced Cython's def methods.
    from tickwheel import _wheel

    for name in ("schedule", "schedule_as"):
        method = _wheel.TimerCore.__dict__[name]
        assert type(method).__name__ == "method_descriptor", type(method)
        assert method.__doc__ and method.__text_signature__


def test_compat_shim_compiled_core_keeps_the_gil_off() -> None:
    # Every compiled module declares freethreading_compatible and earns it
    # with its own locks (_ftlock.h): on a free-threaded build the compiled
    # core loads with the GIL off and leaves it off.
    from tickwheel import _impl, _wheel, purgatory

    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    assert _impl.USE_EXTENSIONS
    assert purgatory.DelayedOperation.__module__ == "tickwheel._purgatory"
    assert getattr(sys, "_is_gil_enabled", lambda: True)() == gil
    assert bool(_wheel._compat()["free_threaded"]) == (
        sysconfig.get_config_var("Py_GIL_DISABLED") == 1
    )


def test_compat_shim_header_guards() -> None:
    text = HEADER.read_text()
    assert "#error" in text and "PY_VERSION_HEX < 0x030A0000" in text
    # 3.15 removed PyWeakref_GetObject: only the pre-3.13 branch may name it.
    guard = "#if PY_VERSION_HEX >= 0x030D0000\n    PyObject *obj"
    before, sep, after = text.partition(guard)
    assert sep and "PyWeakref_GetObject(ref)" not in before
    assert after.index("PyWeakref_GetObject(ref)") > after.index("#else")
    # No private CPython API behind any guard.
    for private in ("_PyTime_", "ob_digit", "_PyLong", "__pyx_"):
        assert private not in text, private


def test_compat_shim_freelist_recycles_exact_tasks_only() -> None:
    # The freelist parks freed TimerTask nodes (up to 256) and hands them back
    # as fresh tasks; subclass instances (Python or _purgatory's C subtype)
    # are never parked.
    import gc

    from tickwheel import _wheel

    if _wheel._compat()["freelist"] == "none":
        pytest.skip("no freelist on this build")
    core = _wheel.TimerCore(manual=True)
    tasks = [core.schedule(10, print, i) for i in range(300)]
    for task in tasks:
        task.cancel()
    del tasks, task
    gc.collect()
    assert _wheel._freelist_size() == 256

    fresh = core.schedule(5, divmod, 7, 2)
    assert _wheel._freelist_size() == 255
    assert (fresh.fn, fresh.args, fresh.delay_ms, fresh.pending) == (
        divmod,
        (7, 2),
        5,
        True,
    )
    assert fresh.expiration_ms == 5 and fresh.state == "pending"
    plain = _wheel.TimerTask(3, print)
    assert (plain.delay_ms, plain.fn, plain.args, plain.pending) == (
        3,
        print,
        (),
        False,
    )
    del plain
    assert _wheel._freelist_size() == 255

    class Sub(_wheel.TimerTask):
        pass

    subs = [Sub(1, print) for _ in range(10)]
    assert _wheel._freelist_size() == 255  # not taken from the freelist
    del subs
    gc.collect()
    assert _wheel._freelist_size() == 255  # nor parked there
    fresh.cancel()
    del fresh
    assert _wheel._freelist_size() == 256

    try:
        from tickwheel import _purgatory
    except ImportError:
        return

    class Op(_purgatory.DelayedOperation):
        def try_complete(self):
            return False

        def on_complete(self):
            pass

    ops = [Op(10) for _ in range(10)]
    del ops
    gc.collect()
    assert _wheel._freelist_size() == 256
