#!/bin/sh
# The Python package's tests that run without a GPU (the stand-in driver's
# among them, whose random calls feed the extension every kind of bad
# argument) with the extension and libjitk built under AddressSanitizer and
# UndefinedBehaviorSanitizer: the C that parses Python's objects is checked
# as the library's own tests check the library.
#
#   tests/python/sanitized.sh BUILD_DIR
#
# BUILD_DIR is a build of the tests (its stand-in driver) with the venv
# that tools/dev.sh makes there (BUILD_DIR/venv, with pytest, NumPy and
# CuPy). The sanitized wheel is built in BUILD_DIR/python-asan and unpacked
# into BUILD_DIR/python-asan/site, which comes first on PYTHONPATH, so the
# venv's own jitk is left alone. ASan's runtime is preloaded into Python,
# which is not built with it; leaks are not checked (CPython keeps objects
# until exit by design), and an allocation too large for ASan returns NULL
# (a test asks for an array of 2^62 elements and expects MemoryError).
set -eu
cd "$(dirname "$0")/../.."
BUILD=$(cd "${1:?usage: tests/python/sanitized.sh BUILD_DIR}" && pwd)
VENV=$BUILD/venv
OUT=$BUILD/python-asan
rm -rf "$OUT/wheel" "$OUT/site"
"$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$OUT/wheel" \
  --config-settings=build-dir="$OUT/build" --config-settings=cmake.build-type=Debug \
  --config-settings=cmake.define.JITK_SANITIZE=ON .
"$VENV/bin/python" -m zipfile -e "$OUT"/wheel/jitk-*.whl "$OUT/site"
asan=$(${CC:-cc} -print-file-name=libasan.so)
ubsan=$(${CC:-cc} -print-file-name=libubsan.so)
[ -f "$asan" ] && [ -f "$ubsan" ] || {
  echo "sanitized.sh: no ASan or UBSan runtime beside ${CC:-cc}" >&2
  exit 1
}
JITK_TEST_FAKECUDA=$BUILD/tests/fakecuda/libcuda.so.1
export JITK_TEST_FAKECUDA
cd tests/python
PYTHONPATH="$OUT/site" LD_PRELOAD="$asan $ubsan" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$VENV/bin/python" -c 'import jitk, sys; sys.exit(0 if "python-asan" in jitk.__file__ else
    "sanitized.sh: Python imported " + jitk.__file__ + ", not the sanitized build")'
PYTHONPATH="$OUT/site" LD_PRELOAD="$asan $ubsan" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider
# The GPU tests of generated kernels on the emulator (tools/emulated-python.sh),
# with the kernels compiled for the CPU under the same sanitizers: NumPy's
# arrays come from the preloaded ASan's malloc, so a kernel that reads or
# writes past an array stops the test.
cd ../..
JITK_TEST_PYTHONPATH="$OUT/site" LD_PRELOAD="$asan $ubsan" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  JT_EMU_SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
  tools/emulated-python.sh "$BUILD"
