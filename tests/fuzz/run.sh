#!/bin/sh
# Builds the libFuzzer targets with clang and runs each for a bounded time
# over its checked-in corpus. New inputs go to a scratch folder, so the
# checked-in corpus only changes when someone adds to it on purpose.
#   tests/fuzz/run.sh [SECONDS]   (default 60)
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-60}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
CC=${CC_FUZZ:-clang} cmake -S . -B "$BUILD" -DJITK_FUZZ=ON -DJITK_WERROR=ON \
  -DJITK_BUILD_TESTS=OFF -DJITK_BUILD_EXAMPLES=OFF -DJITK_BUILD_TOOLS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target fuzz_params -j "$(nproc)"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The parser allocates through the engine and must free everything: leaks
# fail the run as crashes do.
JITK_LOG=off "$BUILD/fuzz/fuzz_params" -max_total_time="$secs" -max_len=512 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$BUILD/" \
  "$scratch" tests/fuzz/corpus/params
echo "fuzz_params: no crash, leak or broken promise in ${secs} s"
