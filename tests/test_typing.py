"""The public API as a user's program and help() see it.

mypy --strict:

``tests/typing/reveal_public.py`` uses every public context manager and
factory; each ``reveal_type`` there carries the type mypy must infer in a
comment.  mypy reads tickwheel's own annotations (the pure-Python twins are
the type source, ``py.typed`` ships with the package), so a ``-> Any`` that
loses a type, or an ``__enter__`` that returns the base class to a subclass,
fails here; so does a type named after a private module
(``tickwheel._wheel_py.TimerTask`` for ``tickwheel.TimerTask``).  The public
names come from ``__init__.pyi`` and ``compat_asyncio.pyi``, which
``tests/typing/make_stubs.py`` writes from the sources: the stubs must be what
it writes now, and mypy's stubtest must find them true to the runtime, on the
compiled core and on the twins.  Then what ``dir()`` and ``help()`` show:
public names only, and public types in the signatures.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import tickwheel

SNIPPET = Path(__file__).parent / "typing" / "reveal_public.py"
REVEALED = re.compile(r'^[^:]+:(\d+): note: Revealed type is "(.*)"$')
# A qualified name in tickwheel, e.g. tickwheel.compat_asyncio.Timeout.  The
# standard library's own private modules (_contextvars.Context) are typeshed's.
TICKWHEEL_NAME = re.compile(r"\btickwheel(?:\.\w+)+")
MAKE_STUBS = Path(__file__).parent / "typing" / "make_stubs.py"
ALLOWLIST = Path(__file__).parent / "typing" / "stubtest_allowlist.txt"


def private_names(revealed: str) -> list[str]:
    """The tickwheel names in a revealed type that pass through a private part.

    >>> private_names("def (tickwheel._wheel_py.TimerTask) -> tickwheel.TimerTask")
    ['tickwheel._wheel_py.TimerTask']
    >>> private_names("_contextvars.Context | tickwheel.compat_asyncio.Timeout")
    []
    """
    return [
        name
        for name in TICKWHEEL_NAME.findall(revealed)
        if any(part.startswith("_") for part in name.split("."))
    ]


def _expected() -> dict[int, str]:
    lines = SNIPPET.read_text(encoding="utf-8").splitlines()
    return {
        number: line.rpartition("  # ")[2]
        for number, line in enumerate(lines, 1)
        if line.lstrip().startswith("reveal_type(")
    }


@pytest.mark.typing  # a tier: mypy takes seconds, stubtest most of a minute
def test_mypy_reveals_the_public_types(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    package_parent = Path(tickwheel.__file__).resolve().parents[1]
    if package_parent.name == "src":  # a checkout (editable install)
        monkeypatch.setenv("MYPYPATH", str(package_parent))
    monkeypatch.chdir(SNIPPET.parent)  # the snippet's module is reveal_public
    stdout, stderr, status = api.run(
        [
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            os.fspath(tmp_path / "cache"),
            SNIPPET.name,
        ]
    )
    assert stderr == ""
    revealed = {}
    errors = []
    for line in stdout.splitlines():
        match = REVEALED.match(line)
        if match:
            revealed[int(match[1])] = match[2]
        else:
            errors.append(line)
    assert errors == [] and status == 0
    expected = _expected()
    assert len(expected) >= 19 and sorted(revealed) == sorted(expected)
    for number, want in expected.items():
        assert want in revealed[number], f"line {number}: {revealed[number]}"
        assert "Any" not in revealed[number] or want == "sched.Event", number
        assert private_names(want) == [], f"line {number} expects {want}"
    private = {n: private_names(t) for n, t in revealed.items() if private_names(t)}
    assert private == {}, f"private module paths in revealed types: {private}"


def _make_stubs() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("make_stubs", MAKE_STUBS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stubs_are_what_make_stubs_writes():
    # The stubs copy the sources' signatures: one changed without running
    # the script fails here, not silently in users' type checks.
    make_stubs = _make_stubs()
    if not (make_stubs.PACKAGE / "_wheel.pyx").is_file():
        pytest.skip("needs the source tree (the .pyx files), not an installed copy")
    stale = [
        name
        for name, make in make_stubs.STUBS.items()
        if not make_stubs.same(
            make(), (make_stubs.PACKAGE / name).read_text(encoding="utf-8")
        )
    ]
    assert stale == [], f"run python tests/typing/make_stubs.py: {stale} changed"


@pytest.mark.typing
@pytest.mark.parametrize(
    "core", [pytest.param("compiled", marks=pytest.mark.c_extension), "pure"]
)
def test_stubtest_finds_the_stubs_true_to_the_runtime(core, tmp_path):
    # mypy's stubtest imports tickwheel and compares every name, signature,
    # property and @final of the stubs with the runtime objects: the compiled
    # classes (signatures from their docstrings) and the twins.
    pytest.importorskip("mypy.stubtest")
    env = {k: v for k, v in os.environ.items() if k != "TICKWHEEL_NO_EXTENSIONS"}
    if core == "pure":
        env["TICKWHEEL_NO_EXTENSIONS"] = "1"
    elif not tickwheel.USE_EXTENSIONS:
        pytest.skip("the compiled core is not built")
    package_parent = Path(tickwheel.__file__).resolve().parents[1]
    if package_parent.name == "src":  # a checkout (editable install)
        env["MYPYPATH"] = str(package_parent)
    config = tmp_path / "mypy.ini"
    # pyspark/pyarrow (tickwheel.spark) may be absent or untyped: not in question.
    config.write_text(
        f"[mypy]\ncache_dir = {tmp_path / 'cache'}\nignore_missing_imports = True\n"
    )
    args = [
        sys.executable,
        "-m",
        "mypy.stubtest",
        "tickwheel",
        "--concise",
        "--mypy-config-file",
        str(config),
        "--allowlist",
        str(ALLOWLIST),
        "--ignore-unused-allowlist",
    ]
    if core == "compiled":
        # The stub marks the compiled classes with C fields as disjoint bases
        # (PEP 800) the way the twin is one, by their __slots__; stubtest on
        # the compiled core asks for the @disjoint_base spelling, which the
        # twin's stubtest refuses next to __slots__.
        args.append("--ignore-disjoint-bases")
    proc = subprocess.run(
        args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dir_lists_only_public_names_and_submodules():
    # "annotations" (a `from __future__ import annotations`) was listed.
    public = {name for name in dir(tickwheel) if not name.startswith("_")}
    modules = {
        name
        for name in public
        if isinstance(getattr(tickwheel, name), types.ModuleType)
    }
    assert public - modules == set(tickwheel.__all__) - {"__version__"}


def test_system_timer_signature_names_the_accepted_executors():
    # help(SystemTimer) showed `executor: 'Executor' = None` (a private alias).
    executor = inspect.signature(tickwheel.SystemTimer).parameters["executor"]
    assert "Literal['inline']" in str(executor.annotation)
    assert "concurrent.futures.Executor" in str(executor.annotation)


@pytest.mark.parametrize("cls", [tickwheel.SystemTimer, tickwheel.MockTimer])
def test_timers_list_no_driver_hooks(cls):
    # help(SystemTimer) listed the core's driver hooks `take_ready` and
    # `poll`: calling them from user code steals due tasks from the thread
    # keeping time.  They are private now; docs/api.md names the rest.
    public = {name for name in dir(cls) if not name.startswith("_")}
    assert {"take_ready", "poll"} & public == set()
    api = Path(__file__).parents[1].joinpath("docs", "api.md").read_text()
    undocumented = {n for n in public if f"`{n}" not in api and f".{n}" not in api}
    assert undocumented == set(), undocumented
