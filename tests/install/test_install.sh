#!/bin/sh
# Installs the build into a scratch prefix, then builds and runs consumers
# through find_package(jitk CONFIG) and through pkg-config.
# Usage: test_install.sh BUILD_DIR THIS_DIR WORK_DIR C_COMPILER
set -eu
BUILD=$1 HERE=$2 WORK=$3 CC=$4
rm -rf "$WORK"
mkdir -p "$WORK"
PREFIX="$WORK/prefix"
# The consumers compile through the kernel cache: a scratch one.
export JITK_CACHE_DIR="$WORK/cache"
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log"
for f in include/jitk/jitk.h include/jitk/array.cuh lib/cmake/jitk/jitkConfig.cmake \
         lib/pkgconfig/jitk.pc lib/libjitk.a bin/jitk; do
  [ -e "$PREFIX/$f" ] || { echo "missing after install: $f"; exit 1; }
done
ls "$PREFIX"/lib/libjitk.so.* >/dev/null

cmake -S "$HERE/consumer" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/configure.log"
cmake --build "$WORK/consumer" >"$WORK/build.log"
"$WORK/consumer/consumer_shared"
"$WORK/consumer/consumer_static"

if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
  # shellcheck disable=SC2046
  "$CC" -std=c11 -o "$WORK/consumer_pc" "$HERE/consumer/main.c" \
    $(pkg-config --cflags --libs jitk) -Wl,-rpath,"$PREFIX/lib"
  "$WORK/consumer_pc"
  # Static: the archive by path, then what Libs.private says it needs.
  "$CC" -std=c11 -o "$WORK/consumer_pc_static" "$HERE/consumer/main.c" \
    $(pkg-config --cflags jitk) "$PREFIX/lib/libjitk.a" \
    $(pkg-config --static --libs jitk | sed 's/-ljitk\b//')
  "$WORK/consumer_pc_static"
else
  echo "pkg-config not installed; the pkg-config consumer was not built" >&2
  exit 1
fi
echo "install test passed"
