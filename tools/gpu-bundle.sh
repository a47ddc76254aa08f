#!/bin/sh
# Builds jitk here and gathers what a GPU machine needs to run the GPU
# tests, the examples and the benchmarks into gpu-bundle/: the binaries,
# libjitk, and every non-system shared library they load (Criterion and its
# dependencies), because the GPU machine has no -dev packages and no
# package access. NVRTC and the driver are not copied: the GPU machine has
# its own toolkit and driver.
#
#   tools/gpu-bundle.sh [BUILD_DIR]     here, on the build machine
#   gpu-bundle/run.sh                   there, from the repository root
#
# With the device tool: build here, then run `gpu-bundle/run.sh` with
# carry ["gpu-bundle"]. docs/GPU.md has the details.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
DEST=$ROOT/gpu-bundle

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DJITK_WERROR=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc)"

rm -rf "$DEST"
mkdir -p "$DEST/bin" "$DEST/lib"
BINS="$BUILD/bin/jitk $BUILD/bin/jitk-bench $BUILD/tests/test_gpu_raw $BUILD/tests/test_gpu_elementwise
      $BUILD/tests/test_driver_nodriver $BUILD/examples/demo $BUILD/examples/raw_saxpy $BUILD/examples/elementwise"
[ -x "$BUILD/examples/existing_cuda" ] && BINS="$BINS $BUILD/examples/existing_cuda"
# The reduction test and example join when they exist; run.sh runs their
# steps only when their binaries are in the bundle.
[ -x "$BUILD/tests/test_gpu_reduction" ] && BINS="$BINS $BUILD/tests/test_gpu_reduction"
[ -x "$BUILD/tests/test_gpu_matmul" ] && BINS="$BINS $BUILD/tests/test_gpu_matmul"
[ -x "$BUILD/examples/mlp_layer" ] && BINS="$BINS $BUILD/examples/mlp_layer"
[ -x "$BUILD/examples/mlp_train_step" ] && BINS="$BINS $BUILD/examples/mlp_train_step"
[ -x "$BUILD/tests/test_gpu_multi" ] && BINS="$BINS $BUILD/tests/test_gpu_multi"
[ -x "$BUILD/examples/multi_gpu" ] && BINS="$BINS $BUILD/examples/multi_gpu"
[ -x "$BUILD/examples/reduction" ] && BINS="$BINS $BUILD/examples/reduction"
# The cache's tests of dependency records and of who may write a cache run
# there too: as root, on another filesystem, beside device engines
# (toolchain_child is a program test_cache_deps runs from its own folder).
# NVRTC's compile tests too: NVRTC keeps a cache of its own only where a
# driver loads, and they check that jitk's compiles never go through it.
for t in test_cache_deps toolchain_child test_cache_tiers test_nvrtc_deps test_nvrtc_compile; do
  [ -x "$BUILD/tests/$t" ] && BINS="$BINS $BUILD/tests/$t"
done
[ -x "$BUILD/examples/link" ] && BINS="$BINS $BUILD/examples/link"
for b in $BINS; do cp "$b" "$DEST/bin/"; done
# The object examples/link links, built by nvcc here.
[ -e "$BUILD/examples/activations.o" ] && cp "$BUILD/examples/activations.o" "$DEST/bin/"
cp "$ROOT/tools/gpu-run.sh" "$DEST/run.sh"
cp "$ROOT/tools/gpu-ncu.sh" "$DEST/ncu.sh"
chmod +x "$DEST/run.sh" "$DEST/ncu.sh"
if [ -d "$ROOT/tools/bench/peers" ]; then cp -r "$ROOT/tools/bench/peers" "$DEST/peers"; fi

# Non-system libraries, found with ldd. glibc's own libraries, the C++
# runtime, NVRTC and the driver come from the GPU machine.
for b in "$DEST"/bin/*; do
  ldd "$b" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libresolv.so* | \
    libstdc++.so* | libgcc_s.so* | libnvrtc* | libcuda.so* | libcudart.so*) ;;
    *) cp -L "$lib" "$DEST/lib/" ;;
  esac
done
du -sh "$DEST"
echo "bundle ready: run gpu-bundle/run.sh on the GPU machine"
