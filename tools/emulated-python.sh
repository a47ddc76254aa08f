#!/bin/sh
# The Python package's GPU tests of generated kernels (ElementwiseKernel,
# ReductionKernel, the errors both raise, random views of both), of raw
# kernels (RawKernel, RawModule) and random matmuls on a machine without a
# GPU:
# the stand-in driver (tests/fakecuda) comes first on LD_LIBRARY_PATH, the
# tests' `lib` makes CuPy arrays over host memory, and the emulator
# (tests/emu, loaded through JITK_TEST_EMU) runs each generated kernel on
# the CPU, so every result is checked against NumPy as on a GPU.
#
#   tools/emulated-python.sh BUILD_DIR [PYTEST ARGS...]
#
# BUILD_DIR is a build of the tests with the venv tools/dev.sh makes there,
# jitk installed in it. --capture=sys: the emulator reads the sources the
# library prints to file descriptor 2, which pytest's default capture
# would take. JITK_TEST_PYTHONPATH, when set, comes first on PYTHONPATH
# (tests/python/sanitized.sh puts its sanitized build there).
set -eu
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:?usage: tools/emulated-python.sh BUILD_DIR [PYTEST ARGS...]}" && pwd)
shift
FAKE_DIR=$BUILD/tests/fakecuda
EMU=$BUILD/tests/emu/libjt_emu.so
[ -e "$FAKE_DIR/libcuda.so.1" ] && [ -e "$EMU" ] || {
  echo "emulated-python.sh: $BUILD has no stand-in driver or emulator (build its tests)" >&2
  exit 1
}
CACHE=$(mktemp -d /tmp/jitk-emulated-cache-XXXXXX)
trap 'rm -rf "$CACHE"' EXIT
cd tests/python
PYTHONPATH=${JITK_TEST_PYTHONPATH:-} LD_LIBRARY_PATH=$FAKE_DIR JITK_TEST_EMU=$EMU \
  JITK_CACHE_DIR=$CACHE "$BUILD/venv/bin/python" -m pytest -q -p no:cacheprovider \
  --capture=sys test_gpu_elementwise.py test_gpu_reduction.py test_gpu_errors.py \
  test_gpu_random_layouts.py test_gpu_raw.py test_gpu_matmul.py "$@"
