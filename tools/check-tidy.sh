#!/bin/sh
# Runs clang-tidy with .clang-tidy (the static analyzer and the bugprone
# checks) over every C file of src/, two files a process, and fails on any
# finding. Needs clang-tidy (Debian: the clang-tidy package, version 14 on
# Debian 12, which CI runs) and a configured build folder for the compile
# commands (BUILD_DIR, default build-tidy; made here when missing).
set -eu
cd "$(dirname "$0")/.."
TIDY=${CLANG_TIDY:-clang-tidy}
BUILD=${BUILD_DIR:-build-tidy}
cmake -S . -B "$BUILD" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DJITK_BUILD_TESTS=OFF \
  -DJITK_BUILD_TOOLS=OFF -DJITK_BUILD_EXAMPLES=OFF >/dev/null
# The generated sources the library includes (the cache's schema).
cmake --build "$BUILD" --target jitk_objects -j "$(nproc)" >/dev/null
LOG=$BUILD/clang-tidy.log
if git ls-files 'src/*.c' | xargs -P "$(nproc)" -n 2 "$TIDY" -p "$BUILD" --quiet >"$LOG" 2>&1; then
  echo "check-tidy: $(git ls-files 'src/*.c' | wc -l) files, no finding"
else
  grep -E 'error:|warning:' "$LOG" | sort -u >&2 || cat "$LOG" >&2
  echo "check-tidy: findings above (the whole output: $LOG)" >&2
  exit 1
fi
