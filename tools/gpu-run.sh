#!/bin/bash
# Runs on the GPU machine, from the bundle tools/gpu-bundle.sh made: the
# GPU tests, the examples, then the benchmarks, and prints a short table
# last. Logs go to $OUT (the device tool's output folder) when it is set.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LOGS=${OUT:-/tmp/jitk-gpu-logs}
mkdir -p "$LOGS"
# A kernel cache of the run's own, private as jitk requires.
export JITK_CACHE_DIR=$(mktemp -d /tmp/jitk-gpu-cache-XXXXXX)

# NVRTC from the machine's toolkit; CUDA_HOME lets jitk find its headers.
for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-13; do
  if [ -n "$d" ] && [ -e "$d/include/cuda_fp16.h" ]; then export CUDA_HOME=$d; break; fi
done
NVRTC_DIR=$(dirname "$(ls "${CUDA_HOME:-/usr/local/cuda}"/lib*/libnvrtc.so* 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="$HERE/lib:${NVRTC_DIR:-/usr/local/cuda/lib64}:${LD_LIBRARY_PATH:-}"

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee "$LOGS/nvidia-smi.txt"

declare -a NAMES RESULTS
FAILED=0
# ONLY=REGEX runs just the steps whose names match (a quicker call).
step() { # step NAME COMMAND...: runs it, logs it, remembers the outcome
  local name=$1
  shift
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return; fi
  local start end rc
  start=$(date +%s.%N)
  "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  local verdict=ok
  [ $rc -ne 0 ] && { verdict="FAILED (exit $rc)"; FAILED=$((FAILED + 1)); }
  NAMES+=("$name")
  RESULTS+=("$verdict, ${secs} s")
  echo "=== $name: $verdict (${secs} s)"
  tail -n 25 "$LOGS/$name.log"
}

step doctor "$HERE/bin/jitk" doctor
step test_gpu_raw "$HERE/bin/test_gpu_raw" --jobs=1 --verbose
step test_gpu_elementwise "$HERE/bin/test_gpu_elementwise" --jobs=1 --verbose
# Reduction steps run only once the bundle has their binaries (it is built
# whether or not the reduction tests and example exist yet).
[ -x "$HERE/bin/test_gpu_reduction" ] &&
  step test_gpu_reduction "$HERE/bin/test_gpu_reduction" --jobs=1 --verbose
# The matmul tests spend most of their time in NVRTC, so they run several
# at once (MATMUL_JOBS, default 8: about 110 s on the H200 machine's 16
# cores against 250 s one by one).
[ -x "$HERE/bin/test_gpu_matmul" ] &&
  step test_gpu_matmul "$HERE/bin/test_gpu_matmul" --jobs="${MATMUL_JOBS:-8}" --verbose
# Several devices: skipped with "needs two CUDA devices" on a machine of one.
[ -x "$HERE/bin/test_gpu_multi" ] && step test_gpu_multi "$HERE/bin/test_gpu_multi" --jobs=1 --verbose
step test_driver_nodriver "$HERE/bin/test_driver_nodriver" --jobs=1
for t in test_cache_deps test_cache_tiers test_nvrtc_deps test_nvrtc_compile; do
  [ -x "$HERE/bin/$t" ] && step "$t" "$HERE/bin/$t" --jobs=4
done
step demo "$HERE/bin/demo"
step raw_saxpy "$HERE/bin/raw_saxpy"
step example_elementwise "$HERE/bin/elementwise"
[ -x "$HERE/bin/reduction" ] && step example_reduction "$HERE/bin/reduction"
[ -x "$HERE/bin/mlp_layer" ] && step example_mlp_layer "$HERE/bin/mlp_layer"
[ -x "$HERE/bin/mlp_train_step" ] && step example_mlp_train_step "$HERE/bin/mlp_train_step"
[ -x "$HERE/bin/multi_gpu" ] && step example_multi_gpu "$HERE/bin/multi_gpu"
[ -x "$HERE/bin/existing_cuda" ] && step existing_cuda "$HERE/bin/existing_cuda"
[ -x "$HERE/bin/link" ] && step example_link "$HERE/bin/link" "$HERE/bin/activations.o"
if command -v compute-sanitizer >/dev/null; then
  # Memory errors and failed API calls anywhere in the GPU tests.
  step memcheck_tests compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$HERE/bin/test_gpu_raw" --jobs=1
  # The 2^31-element test is left out: under memcheck it would take minutes.
  step memcheck_elementwise compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$HERE/bin/test_gpu_elementwise" --jobs=1 --filter 'elementwise/[!p]*' 
  # The reduction tests' 2^31-element test is left out for the same reason.
  [ -x "$HERE/bin/test_gpu_reduction" ] &&
    step memcheck_reduction compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$HERE/bin/test_gpu_reduction" --jobs=1 --filter 'reduction/[!p]*'
  [ -x "$HERE/bin/test_gpu_matmul" ] &&
    step memcheck_matmul compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$HERE/bin/test_gpu_matmul" --jobs=4
fi
step bench_limits "$HERE/bin/jitk-bench" limits --json "$LOGS/bench.json"
step bench_cache "$HERE/bin/jitk-bench" cache --json "$LOGS/bench.json"
step bench_elementwise "$HERE/bin/jitk-bench" elementwise --json "$LOGS/bench.json"
step bench_reduction "$HERE/bin/jitk-bench" reduction --json "$LOGS/bench.json"
# BENCH_MATMUL_ARGS passes options, e.g. '--only unaligned' for one section.
# shellcheck disable=SC2086
step bench_matmul "$HERE/bin/jitk-bench" matmul --json "$LOGS/bench.json" ${BENCH_MATMUL_ARGS:-}
step bench_autotune "$HERE/bin/jitk-bench" autotune --json "$LOGS/bench.json"
# The layout sweep: its cases, jitk's results, then PyTorch's on the same
# views (tools/sweep_report.py merges the three files).
if [ -z "${ONLY:-}" ] || [[ bench_sweep =~ $ONLY ]]; then
  "$HERE/bin/jitk-bench" sweep --list >"$LOGS/sweep-cases.jsonl"
fi
step bench_sweep "$HERE/bin/jitk-bench" sweep --json "$LOGS/sweep-jitk.jsonl"
# Small arrays: host and GPU time per launch (peers/small.py: PyTorch's).
step bench_small "$HERE/bin/jitk-bench" small --json "$LOGS/bench.json"
step bench_graph "$HERE/bin/jitk-bench" graph --json "$LOGS/bench.json"
# A thread and an engine per device against one thread (its scaling rows
# need two devices or more).
step bench_multi "$HERE/bin/jitk-bench" multi --json "$LOGS/bench.json"
# Cold starts: NVRTC's time for each kind of generated kernel against a
# bare kernel, precompiled headers off and on, first processes included,
# twice; then a manifest of 500 kernels warmed on one thread and on all.
step bench_compile "$HERE/bin/jitk-bench" compile --json "$LOGS/bench.json"
step bench_compile2 "$HERE/bin/jitk-bench" compile --json "$LOGS/bench.json"
step bench_warm "$HERE/bin/jitk-bench" warm 500 --json "$LOGS/bench.json"
if [ -d "$HERE/peers" ]; then
  for p in "$HERE"/peers/*.py; do
    # _*.py are helpers the peers import, not peers; the sweep's peer runs
    # below, with its files.
    case "$(basename "$p")" in _* | sweep.py) continue ;; esac
    step "peer_$(basename "$p" .py)" python3 "$p"
  done
  [ -e "$HERE/peers/sweep.py" ] && step peer_sweep python3 "$HERE/peers/sweep.py" \
    --bench "$HERE/bin/jitk-bench" --cases "$LOGS/sweep-cases.jsonl" --json "$LOGS/sweep-torch.jsonl"
fi

echo
echo "================ jitk on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
for i in "${!NAMES[@]}"; do printf '%-24s %s\n' "${NAMES[$i]}" "${RESULTS[$i]}"; done
echo "---------------- benchmark"
# Only the steps that ran have logs (ONLY= may have left some out).
summary() { # summary LOG REGEX
  [ -e "$LOGS/$1" ] && grep -E "$2" "$LOGS/$1"
  return 0
}
summary bench_limits.log "^(device-to-device|bare|jitk_kernel_launch)"
summary bench_cache.log "^cache:"
summary bench_elementwise.log "GB/s|us/launch|WRONG"
summary bench_reduction.log "GB/s|us/launch|WRONG"
summary bench_matmul.log "TFLOP/s|WRONG|^plan|cuBLASLt"
[ -e "$LOGS/bench_sweep.log" ] && sed -n '/^worst cases/,$p' "$LOGS/bench_sweep.log"
summary bench_small.log "us/launch|WRONG"
summary bench_graph.log "us/replay"
summary bench_multi.log "us/launch|WRONG"
summary bench_warm.log "jitk cache warm"
summary bench_compile.log "ms"
summary bench_compile2.log "ms"
for f in "$LOGS"/peer_*.log; do
  # The sweep's peer prints a line per case; tools/sweep_report.py reads them.
  [ "$(basename "$f")" = peer_sweep.log ] && continue
  summary "$(basename "$f")" "us/launch|GB/s|not measured|Error"
done
# The exit status says whether every step that ran passed.
[ "$FAILED" -eq 0 ]
