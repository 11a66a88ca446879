"""The distribution path a user takes: sdist -> wheel -> fresh venv -> import.

The test copies the source tree to a temporary directory (leftovers from an
editable install included: ``_wheel.c`` and a ``.so`` must *not* reach the
sdist), runs ``python -m build`` there, which makes the sdist and then builds
the wheel *from the sdist*, checks both file lists, installs the wheel into a
fresh venv where no compiler is reachable and Cython is absent, and fires a
timer on the compiled core there.  It needs PyPI (``build``, ``setuptools``
and ``Cython`` for the isolated build environments) and about a minute.

It carries ``c_extension`` as well as ``dist``, so the pure-Python pass
(``TICKWHEEL_NO_EXTENSIONS=1`` / ``--no-c-extensions``) deselects it: the
compiled pass has already proved the wheel, and the opt-out would make the
"compiled" wheel pure.  cibuildwheel's test command leaves it out with
``-m "not dist"``.  ``.ci/build_wheels.sh`` adds the auditwheel step.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

pytestmark = [pytest.mark.dist, pytest.mark.c_extension]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tickwheel"
GENERATED = (".c", ".html", ".so", ".pyd", ".o")

# Not part of a source tree a user would build from; skipped by the copy.
_IGNORE = shutil.ignore_patterns(
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".benchmarks",
    ".venv",
    "venv",
    "out",
)

SMOKE = """
import importlib.util, shutil, sys
import tickwheel
from tickwheel import MockTimer
import tickwheel._wheel as core

assert tickwheel.USE_EXTENSIONS, "the wheel fell back to pure Python"
assert core.__file__.startswith(sys.prefix), core.__file__
assert importlib.util.find_spec("Cython") is None, "Cython is installed"
if sys.platform != "win32":
    found = [c for c in ("gcc", "cc", "c++", "clang") if shutil.which(c)]
    assert not found, f"a compiler is reachable: {found}"
fired = []
timer = MockTimer()
timer.schedule(30, fired.append, "fired")
assert not timer.advance_clock(29) and fired == []
assert timer.advance_clock(1) and fired == ["fired"], fired
print(tickwheel.__version__, tickwheel.USE_EXTENSIONS, core.__file__)
"""


def _bin(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin")


def _python(venv: Path) -> Path:
    return _bin(venv) / ("python.exe" if os.name == "nt" else "python")


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return _python(path)


def _run(*args: object, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [str(a) for a in args], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _no_compiler_env(venv: Path, home: Path) -> dict[str, str]:
    """An environment where only the venv is on PATH and CC/CXX fail."""
    if os.name == "nt":  # Windows needs its system variables; MSVC is not on PATH
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL")}
        env["PATH"] = str(_bin(venv)) + os.pathsep + env.get("SYSTEMROOT", "")
        return env
    return {
        "PATH": str(_bin(venv)),
        "HOME": str(home),
        "CC": "/bin/false",
        "CXX": "/bin/false",
    }


def _version() -> str:
    text = (PACKAGE / "_version.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    assert match, "no __version__ literal in _version.py"
    return match.group(1)


def _artefacts() -> set[str]:
    """Build products in the source tree (other files may change concurrently)."""
    found = {p.name for p in ROOT.glob("*") if p.name in ("build", "dist")}
    found |= {p.name for p in (ROOT / "src").glob("*.egg-info")}
    found |= {p.name for p in PACKAGE.iterdir() if p.name.endswith(GENERATED)}
    return found


def test_dist_sdist_wheel_install_smoke(tmp_path: Path) -> None:
    if not (ROOT / "setup.py").is_file() or not (PACKAGE / "_wheel.pyx").is_file():
        pytest.skip("needs the source tree, not an installed copy of the tests")
    version = _version()
    before = _artefacts()

    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=_IGNORE)
    tools = _venv(tmp_path / "tools")
    _run(
        tools, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "build"
    )
    build_env = {k: v for k, v in os.environ.items() if k != "TICKWHEEL_NO_EXTENSIONS"}
    # No --sdist/--wheel: build makes the sdist, then the wheel from the sdist.
    _run(tools, "-m", "build", "--outdir", tmp_path / "dist", src, env=build_env)

    (sdist,) = (tmp_path / "dist").glob("tickwheel-*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("tickwheel-*.whl")
    assert sdist.name == f"tickwheel-{version}.tar.gz"
    assert wheel.name.startswith(f"tickwheel-{version}-cp")
    assert not wheel.name.endswith("-none-any.whl"), wheel.name

    with tarfile.open(sdist) as tar:
        prefix = f"tickwheel-{version}/"
        sdist_files = {m.name.removeprefix(prefix) for m in tar.getmembers()}
    for needed in (
        "pyproject.toml",
        "setup.py",
        "MANIFEST.in",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "src/tickwheel/_wheel.pyx",
        "src/tickwheel/_purgatory.pyx",
        "src/tickwheel/_kafka.pyx",
        "src/tickwheel/spark/_replay.pyx",
        "src/tickwheel/_wheel.pxd",
        "src/tickwheel/_purgatory.pxd",
        "src/tickwheel/_kafka.pxd",
        "src/tickwheel/_compat.h",
        "src/tickwheel/_ftlock.h",
        "src/tickwheel/_wheel_struct.h",
        "src/tickwheel/_wheel_inline.h",
        "src/tickwheel/_wheel_py/__init__.py",
        "src/tickwheel/_wheel_py/core.py",
        "src/tickwheel/_purgatory_py.py",
        "src/tickwheel/_kafka_py.py",
        "src/tickwheel/_version.py",
        "src/tickwheel/py.typed",
        "tests/conftest.py",
        "tests/test_wheel.py",
        "docs/design.md",
    ):
        assert needed in sdist_files, f"sdist lacks {needed}"
    stubs = sorted(p.name for p in PACKAGE.glob("*.pyi"))
    assert stubs, "no type stubs in src/tickwheel"
    for stub in stubs:  # the public names' types (tests/typing/make_stubs.py)
        assert f"src/tickwheel/{stub}" in sdist_files, f"sdist lacks {stub}"
    units = sorted(p.name for p in PACKAGE.glob("_wheel_*.pxi"))
    assert units, "no _wheel_*.pxi units in src/tickwheel"
    for unit in units:  # _wheel.pyx includes them; the sdist rebuilds it
        assert f"src/tickwheel/{unit}" in sdist_files, f"sdist lacks {unit}"
    leaked = sorted(f for f in sdist_files if f.endswith(GENERATED))
    assert not leaked, f"sdist ships generated files: {leaked}"

    with zipfile.ZipFile(wheel) as whl:
        wheel_files = set(whl.namelist())
    compiled = [
        f
        for f in wheel_files
        if f.startswith("tickwheel/_wheel.") and f.endswith(tuple(EXTENSION_SUFFIXES))
    ]
    assert compiled, f"wheel has no compiled core: {sorted(wheel_files)}"
    # Every compiled module _impl selects, and the replay engine's loop.
    for module in (
        "tickwheel/_purgatory.",
        "tickwheel/_kafka.",
        "tickwheel/spark/_replay.",
    ):
        assert any(
            f.startswith(module) and f.endswith(tuple(EXTENSION_SUFFIXES))
            for f in wheel_files
        ), f"wheel lacks {module}*: {sorted(wheel_files)}"
    assert "tickwheel/spark/_replay.pyx" not in wheel_files
    assert "tickwheel/py.typed" in wheel_files
    for stub in stubs:
        assert f"tickwheel/{stub}" in wheel_files, f"wheel lacks {stub}"
    for pxd in ("_wheel.pxd", "_purgatory.pxd", "_kafka.pxd"):
        assert f"tickwheel/{pxd}" in wheel_files, f"wheel lacks {pxd}"
    for module in PACKAGE.glob("*.py"):
        assert f"tickwheel/{module.name}" in wheel_files, f"wheel lacks {module.name}"
    leftovers = sorted(
        f for f in wheel_files if f.endswith((".pyx", ".c", ".html", ".o"))
    )
    assert not leftovers, f"wheel ships build leftovers: {leftovers}"

    user = tmp_path / "user"
    python = _venv(user)
    env = _no_compiler_env(user, tmp_path)
    _run(
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-index",
        "--only-binary=:all:",
        wheel,
        env=env,
    )
    out = _run(python, "-c", SMOKE, env=env)
    assert out.startswith(f"{version} True "), out

    assert _artefacts() == before, "the build wrote into the source tree"
