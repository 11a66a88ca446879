#!/usr/bin/env bash
# Build tickwheel's extension with AddressSanitizer in a throw-away clone and
# venv, then run the unit and model tests (both cores) under it.
#
#   tests/asan/run.sh [WORKDIR] [pytest args...]
#
# Needs Debian's clang and its runtime: apt-get install -y clang libclang-rt-14-dev
# Never touches the checkout it is run from (the .so there may be mapped by
# other processes): it clones the committed HEAD into WORKDIR (default
# /tmp/tickwheel-asan) and builds there.  CPython's own allocations are not
# leak-checked (detect_leaks=0): ASan here looks for out-of-bounds access,
# use-after-free and double free in the core.
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/tickwheel-asan}"
shift || true
PY="${PYTHON:-python3}"
CC="${CC:-clang}"
rm -rf "$WORK"
git clone -q "$SRC" "$WORK/repo"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q -U "Cython>=3.1" "setuptools>=77" hypothesis pytest \
  numpy pyarrow  # for the replay engine's tests (its compiled loop)
cd "$WORK/repo"
# -O1 keeps the build quick and stack traces readable; the flags reach both
# compile and link through setuptools' CFLAGS/LDFLAGS.
CC="$CC" LDSHARED="$CC -shared" \
CFLAGS="-fsanitize=address -fno-omit-frame-pointer -O1 -g" \
LDFLAGS="-fsanitize=address" \
  "$WORK/venv/bin/python" -m pip install -q --no-build-isolation -e .
ASAN_RT="$("$CC" -print-file-name=libclang_rt.asan-x86_64.so)"
test -f "$ASAN_RT" || { echo "ASan runtime not found: $ASAN_RT" >&2; exit 2; }
# The instrumented .so must reference the ASan runtime, or the run proves nothing.
for SO in src/tickwheel/_wheel*.so src/tickwheel/_purgatory*.so src/tickwheel/spark/_replay*.so; do
  [ "$(nm -D "$SO" | grep -c __asan_report)" -gt 0 ] || { echo "$SO is not instrumented" >&2; exit 2; }
done
TESTS=(tests/test_bucket.py tests/test_wheel.py tests/test_wheel_model.py
       tests/test_timer.py tests/test_twin_parity.py tests/test_purgatory.py
       tests/test_compat_sched.py tests/test_compat_threading.py tests/test_compat_asyncio.py)
for f in tests/test_bad_input.py tests/test_model_interactions.py \
         tests/test_compat_asyncio_model.py tests/test_compat_threading_model.py \
         tests/test_precascade.py tests/test_faults_more.py tests/test_stress.py \
         tests/test_purgatory_lock.py tests/test_kafka_ops.py tests/test_replay_engine.py \
         tests/test_replay_loop.py tests/test_schedule_paths.py \
         tests/test_purgatory_countdown.py tests/test_postpone.py; do
  [ -f "$f" ] && TESTS+=("$f")
done
LD_PRELOAD="$ASAN_RT" \
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=0" \
PYTHONMALLOC=malloc \
  "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider -m "not cluster and not docs" "${TESTS[@]}" "$@"
echo "ASan run clean: ${TESTS[*]}"
