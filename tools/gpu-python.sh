#!/bin/bash
# Runs the Python package's GPU checks on a GPU machine, from the repository
# root: installs the jitk wheel found in .whl/ (built on the build machine
# with `pip wheel . --no-deps -w .whl`), then runs, with one kernel cache
# shared by all of them:
#   1. in parallel: jitk's own pytest suite (tests/python), CuPy's four test
#      files with jitk's classes (tests/python/run_cupy_conformance.py, one
#      process per file, applicable tests only) and, when gpu-bundle/ is
#      there, the C library's GPU tests (gpu-bundle/run.sh with STEPS, a
#      regular expression of its step names; default: the test steps);
#   2. the examples of examples/python, one after another (each checks its
#      results against PyTorch and fails if they are wrong);
#   3. alone, so nothing else shares the GPU: the benchmark of the Python
#      layer against CuPy and PyTorch (tools/bench/peers/python_api.py).
# Every log goes into one archive, $OUT/python-gpu-logs.tgz (the device
# tool brings back only a few files); the conformance results, merged, go
# to $OUT/conformance-results.tsv for `run_cupy_conformance.py --update-doc`.
#
#   tools/gpu-python.sh [PART...]    PART: pytest conformance c examples bench
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUTDIR=${OUT:-/tmp/jitk-python-gpu}
LOGS=$(mktemp -d /tmp/jitk-python-logs-XXXXXX)
mkdir -p "$OUTDIR"
PARTS=${*:-pytest conformance c examples bench}
want() { [[ " $PARTS " == *" $1 "* ]]; }

export PYTHONUNBUFFERED=1
export JITK_CACHE_DIR=$(mktemp -d /tmp/jitk-python-cache-XXXXXX)
for d in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-13; do
  if [ -n "$d" ] && [ -e "$d/include/cuda_fp16.h" ]; then export CUDA_HOME=$d; break; fi
done
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"

python3 -m pip install -q --no-deps --no-index --force-reinstall .whl/jitk-*.whl \
  >"$LOGS/install.log" 2>&1 || { cat "$LOGS/install.log"; exit 1; }
python3 -c 'import jitk; print("jitk", jitk.__version__, "devices:", jitk.device_count(),
  "nvrtc:", jitk.nvrtc_version())' 2>&1 | tee "$LOGS/import.log"

pids=()
if want pytest; then
  (timeout 360 python3 -m pytest tests/python -q -p no:cacheprovider -rfE \
     --junitxml "$LOGS/pytest.xml" >"$LOGS/pytest.log" 2>&1; echo "exit $?" >>"$LOGS/pytest.log") &
  pids+=($!)
fi
if want conformance; then
  for f in elementwise userkernel reduction raw; do
    (timeout 240 python3 tests/python/run_cupy_conformance.py "$f" --applicable-only \
       --timeout 60 --out "$LOGS/conformance-$f" >"$LOGS/conformance-$f.log" 2>&1
     echo "exit $?" >>"$LOGS/conformance-$f.log") &
    pids+=($!)
  done
fi
if want c && [ -x gpu-bundle/run.sh ]; then
  (OUT="$LOGS/c" ONLY="${STEPS:-^(test_|memcheck_)}" timeout 420 gpu-bundle/run.sh \
     >"$LOGS/c.log" 2>&1; echo "exit $?" >>"$LOGS/c.log") &
  pids+=($!)
fi
for p in "${pids[@]}"; do wait "$p"; done

if want examples; then
  for f in examples/python/*.py; do
    echo "--- $f"
    timeout 120 python3 "$f" 2>&1
    echo "exit $?"
  done >"$LOGS/examples.log" 2>&1
fi

if want bench; then
  (cd tools/bench/peers && timeout 120 python3 python_api.py) >"$LOGS/bench.log" 2>&1
  echo "exit $?" >>"$LOGS/bench.log"
fi

# Merged conformance results, one header.
first=1
for r in "$LOGS"/conformance-*/results.tsv; do
  [ -e "$r" ] || continue
  if [ $first = 1 ]; then cat "$r"; first=0; else tail -n +2 "$r"; fi
done >"$OUTDIR/conformance-results.tsv"

echo "=== summaries"
[ -e "$LOGS/pytest.log" ] && tail -n 40 "$LOGS/pytest.log"
for f in "$LOGS"/conformance-*.log; do [ -e "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done
[ -e "$LOGS/c.log" ] && tail -n 30 "$LOGS/c.log"
[ -e "$LOGS/examples.log" ] && cat "$LOGS/examples.log"
[ -e "$LOGS/bench.log" ] && cat "$LOGS/bench.log"
tar czf "$OUTDIR/python-gpu-logs.tgz" -C "$LOGS" .
