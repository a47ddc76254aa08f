#!/bin/bash
# Profiles the kernels of chosen layout-sweep cases with Nsight Compute, on
# the GPU machine, from the repository root after tools/gpu-bundle.sh
# (which copies this script to gpu-bundle/ncu.sh):
#
#   gpu-bundle/ncu.sh OUTDIR CASE...
#
# CASE is a sweep case's id, matched whole (`jitk-bench sweep --list`
# prints them); regular-expression characters in it are taken literally.
# For each case, OUTDIR gets the case's own timing (CASE.plain.txt) and a
# report of two launches of each of its kernels, after four (CASE.ncu.txt):
# duration, DRAM bytes and throughput, occupancy, registers, waves, and
# the share of warps stalled on memory. Clocks are left alone
# (--clock-control none), as the machine's other measurements are.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${1:?usage: ncu.sh OUTDIR CASE...}
shift
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export JITK_CACHE_DIR=${JITK_CACHE_DIR:-$(mktemp -d /tmp/jitk-ncu-cache-XXXXXX)}
mkdir -p "$OUTDIR"
status=0
for c in "$@"; do
  re=$(printf '%s' "$c" | sed 's/[][\.*^$+?(){}|]/\\&/g')
  name=$(printf '%s' "$c" | tr -c 'a-zA-Z0-9\n' '_')
  "$HERE/bin/jitk-bench" sweep --only "^$re\$" >"$OUTDIR/$name.plain.txt" 2>&1 || status=1
  ncu --clock-control none -k 'regex:^sw_(sum|add|mul2)' --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct \
    "$HERE/bin/jitk-bench" sweep --only "^$re\$" >"$OUTDIR/$name.ncu.txt" 2>&1 || status=1
done
exit $status
