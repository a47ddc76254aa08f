#!/bin/sh
# Adds to gpu-bundle/ a second jitk-bench, built from another revision, so
# that one call on the GPU machine can time the code before a change and
# after it, on the same GPU and under the same conditions.
#
#   tools/gpu-bundle.sh                 here: the bundle of the working tree
#   tools/gpu-ab.sh REV                 here: gpu-bundle/bin/jitk-bench-SHORT, REV's jitk-bench
#   tools/gpu-ab.sh --bench-here REV    the same of REV's library with this tree's
#                                       benchmarks (tools/bench), for cases REV lacks
#   gpu-bundle/bin/jitk-bench ...       there: the working tree's code
#   gpu-bundle/bin/jitk-bench-SHORT ... there: REV's code
#
# jitk-bench (like every test binary) links libjitk statically, and the
# kernels' templates are built into libjitk: putting another build's
# libjitk.so first in LD_LIBRARY_PATH changes nothing, and such an A/B
# times the same code twice. Two builds of the code need two binaries.
# The second binary loads the same libraries as the first, which the
# bundle already holds.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH_HERE=0
if [ "${1:-}" = "--bench-here" ]; then
  BENCH_HERE=1
  shift
fi
REV=${1:?usage: tools/gpu-ab.sh [--bench-here] REV (a commit, branch or tag)}
if [ ! -d "$ROOT/gpu-bundle/bin" ]; then
  echo "tools/gpu-ab.sh: no gpu-bundle/ here; run tools/gpu-bundle.sh first" >&2
  exit 2
fi
if ! SHORT=$(git -C "$ROOT" rev-parse --short --verify --quiet "$REV^{commit}"); then
  echo "tools/gpu-ab.sh: $REV names no commit of this repository" >&2
  exit 2
fi
WT=$(mktemp -d /tmp/jitk-ab-src-XXXXXX)
BUILD=$(mktemp -d /tmp/jitk-ab-build-XXXXXX)
cleanup() {
  git -C "$ROOT" worktree remove --force "$WT" >/dev/null 2>&1 || true
  rm -rf "$WT" "$BUILD"
}
trap cleanup EXIT
git -C "$ROOT" worktree add --detach "$WT" "$SHORT" >/dev/null
if [ "$BENCH_HERE" = 1 ]; then
  rm -rf "$WT/tools/bench"
  cp -R "$ROOT/tools/bench" "$WT/tools/bench"
fi
cmake -S "$WT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DJITK_WERROR=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target jitk_bench >/dev/null
NAME=jitk-bench-$SHORT
[ "$BENCH_HERE" = 1 ] && NAME=$NAME-bench-here
cp "$BUILD/bin/jitk-bench" "$ROOT/gpu-bundle/bin/$NAME"
echo "gpu-bundle/bin/$NAME: jitk-bench of $REV ($SHORT)$([ "$BENCH_HERE" = 1 ] && echo ", this tree's benchmarks")"
