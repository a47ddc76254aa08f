#!/bin/sh
# Adds to gpu-bundle/ a second jitk-bench, built from another revision, so
# that one call on the GPU machine can time the code before a change and
# after it, on the same GPU and under the same conditions.
#
#   tools/gpu-bundle.sh                 here: the bundle of the working tree
#   tools/gpu-ab.sh REV                 here: gpu-bundle/bin/jitk-bench-SHORT, REV's jitk-bench
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
REV=${1:?usage: tools/gpu-ab.sh REV (a commit, branch or tag)}
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
cmake -S "$WT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DJITK_WERROR=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target jitk_bench >/dev/null
cp "$BUILD/bin/jitk-bench" "$ROOT/gpu-bundle/bin/jitk-bench-$SHORT"
echo "gpu-bundle/bin/jitk-bench-$SHORT: jitk-bench of $REV ($SHORT)"
