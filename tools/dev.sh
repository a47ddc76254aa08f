#!/bin/sh
# The README's two commands. On a fresh Debian 12 machine with the CUDA
# toolkit installed:
#   tools/dev.sh demo   installs the Debian packages jitk needs, builds, runs the demo
#   tools/dev.sh test   installs them, builds, runs the whole test suite (C and Python)
#   tools/dev.sh deps   installs what `test` needs, and nothing else (.ci/run)
# BUILD_DIR (default: build) chooses the build folder.
set -eu
cd "$(dirname "$0")/.."
what=${1:-}
case "$what" in
  demo | test | deps) ;;
  *) echo "usage: tools/dev.sh demo|test|deps" >&2; exit 2 ;;
esac

PACKAGES="build-essential cmake pkg-config libsqlite3-dev libxxhash-dev libcriterion-dev libdlpack-dev libhiredis-dev"
# clang builds the libFuzzer targets that .ci/run runs after the tests, and
# clang-tidy analyzes src/ there; the Python package's tests need Python's
# headers and venv; the remote cache tier's tests run a Redis server.
[ "$what" != demo ] && PACKAGES="$PACKAGES clang clang-tidy python3-dev python3-venv redis-server"
missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing:$missing"
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

[ "$what" = deps ] && exit 0

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  PATH=/usr/local/cuda/bin:$PATH
  export PATH
fi
BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DJITK_WERROR=ON
cmake --build "$BUILD" -j "$(nproc)"
if [ "$what" = demo ]; then
  exec "$BUILD/examples/demo"
fi
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)"

# The Python package, built and installed by pip into a venv of the build
# folder as a user would install it, then its tests (those that need a GPU
# skip with "no CUDA device" on a machine without one). pytest runs from
# tests/python, so `import jitk` finds the installed package, not python/.
VENV=$(cd "$BUILD" && pwd)/venv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# CuPy imports and makes arrays over host memory without a GPU, so the
# package's CuPy path runs on the stand-in driver in test_fake_driver.py.
"$VENV/bin/python" -m pip install -q --disable-pip-version-check pytest numpy cupy-cuda13x
rm -rf "$BUILD/wheel"
"$VENV/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$BUILD/wheel" \
  --config-settings=build-dir="$BUILD/python-wheel" .
WHEEL=$(ls "$BUILD"/wheel/jitk-*.whl)
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
  "$WHEEL"
# test_fake_driver.py runs the launch path on the stand-in driver built
# with the tests (tests/fakecuda).
JITK_TEST_FAKECUDA=$(cd "$BUILD" && pwd)/tests/fakecuda/libcuda.so.1
export JITK_TEST_FAKECUDA
(cd tests/python && "$VENV/bin/python" -m pytest -q -p no:cacheprovider)
# The GPU tests of ElementwiseKernel and ReductionKernel (the errors they
# raise, random views) once more without a GPU: on the stand-in driver, with CuPy
# arrays over host memory and each generated kernel run on the CPU by the
# emulator (tests/emu), whose results the tests check against NumPy.
tools/emulated-python.sh "$BUILD"

# The same wheel under every CPython from 3.10 on that this machine has.
rc=0
tests/python/abi3_check.sh "$WHEEL" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"

# The same wheel on a machine without the CUDA toolkit, with NVRTC and the
# headers from NVIDIA's wheels (exit 77: this machine cannot hide its
# toolkit or reach the package index, and the check is skipped).
rc=0
tests/python/wheels_only.sh "$WHEEL" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
