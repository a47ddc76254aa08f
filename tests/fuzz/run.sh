#!/bin/sh
# Builds the libFuzzer targets with clang and runs each in turn for a
# bounded time over its checked-in corpus (tests/fuzz/corpus/NAME) and with
# its dictionary (tests/fuzz/NAME.dict) when it has one. New inputs go to a
# scratch folder, so the checked-in corpus only changes when someone adds
# to it on purpose.
#
#   tests/fuzz/run.sh [TOTAL_SECONDS]    (default 180)
#
# TOTAL_SECONDS is the fuzzing time of the whole run, shared equally by the
# targets (at least 10 s each); building comes on top (40-80 s from scratch
# on 2 cores, measured), and each target spends a second or two starting.
# The default keeps the step under 5 minutes on a 2-core CI machine.
# FUZZ_BUILD_DIR picks the build folder (build-fuzz), CC_FUZZ the compiler
# (clang).
#
# A crash, leak or broken promise fails the run after every target has had
# its turn; the input is saved as BUILD/NAME-crash-... and the fuzzer's
# report says which promise broke. Minimize one with
#   BUILD/fuzz/fuzz_NAME -minimize_crash=1 -max_total_time=60 FILE
set -eu
cd "$(dirname "$0")/../.."
total=${1:-180}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}

# One line per target: NAME (built as fuzz_NAME) and its -max_len, which
# bounds an input to what the parser under test meets in practice.
targets="params 512
codegen 4096
image 16384
signature 256
ptxas 4096
cache_db 131072
matmul 1024
deps 4096"

count=$(printf '%s\n' "$targets" | wc -l)
each=$((total / count))
[ "$each" -ge 10 ] || each=10

CC=${CC_FUZZ:-clang} cmake -S . -B "$BUILD" -DJITK_FUZZ=ON -DJITK_WERROR=ON \
  -DJITK_BUILD_TESTS=OFF -DJITK_BUILD_EXAMPLES=OFF -DJITK_BUILD_TOOLS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target \
  $(printf '%s\n' "$targets" | while read -r name len; do printf 'fuzz_%s ' "$name"; done)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failed=""
start=$(date +%s)
# The targets allocate through the engine and must free everything: leaks
# fail the run as crashes do. A here-document keeps the loop in this shell,
# so `failed` survives it.
while read -r name len; do
  mkdir -p "$scratch/$name"
  dict=""
  [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
  echo "fuzz_$name: ${each} s"
  if JITK_LOG=off "$BUILD/fuzz/fuzz_$name" $dict -max_total_time="$each" -max_len="$len" \
      -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$BUILD/$name-" "$scratch/$name" "tests/fuzz/corpus/$name" </dev/null; then
    echo "fuzz_$name: no crash, leak or broken promise in ${each} s"
  else
    failed="$failed fuzz_$name"
  fi
done <<EOF
$targets
EOF
echo "fuzzing took $(($(date +%s) - start)) s"
if [ -n "$failed" ]; then
  echo "failed:$failed (inputs in $BUILD/)" >&2
  exit 1
fi
