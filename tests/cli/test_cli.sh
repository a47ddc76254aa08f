#!/bin/sh
# The jitk CLI, driven as a user would: jitk_cli WORKDIR.
set -u
JITK=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 1
# A kernel cache of this test's own.
JITK_CACHE_DIR="$WORK/cache"
export JITK_CACHE_DIR
unset JITK_CACHE
fails=0
check() { # check DESCRIPTION EXPECTED-STATUS PATTERN -- command...
  desc=$1 want=$2 pattern=$3
  shift 4
  "$@" >out.txt 2>err.txt
  got=$?
  if [ "$got" -ne "$want" ]; then
    echo "FAIL: $desc: exit $got, expected $want"; cat out.txt err.txt; fails=$((fails + 1)); return
  fi
  if [ -n "$pattern" ] && ! grep -q -- "$pattern" out.txt err.txt; then
    echo "FAIL: $desc: output lacks '$pattern'"; cat out.txt err.txt; fails=$((fails + 1)); return
  fi
  if [ -s out.txt ] && [ "$want" -ne 0 ] && grep -q "error" out.txt; then
    echo "FAIL: $desc: errors belong on stderr"; fails=$((fails + 1)); return
  fi
  echo "ok: $desc"
}

cat >good.cu <<'CU'
#include <cuda_fp16.h>
template <typename T> __global__ void scale(T *x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a;
}
extern "C" __global__ void tiled(const float *x, float *y) {
  __shared__ float s[128];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = s[127 - threadIdx.x];
}
CU
printf 'extern "C" __global__ void k() { this is not cuda }\n' >bad.cu

check "doctor runs with or without a driver" 0 "NVRTC:" -- "$JITK" doctor
check "doctor names the headers" 0 "CUDA headers: /" -- "$JITK" doctor
check "doctor says whether precompiled headers are on" 0 "precompiled headers: " -- "$JITK" doctor
check "doctor --help" 0 "usage: jitk doctor" -- "$JITK" doctor --help
check "help" 0 "commands:" -- "$JITK" help
check "version" 0 "jitk 0." -- "$JITK" version
check "no command" 2 "usage:" -- "$JITK"
check "unknown command" 2 "unknown command" -- "$JITK" frobnicate
check "compile --help" 0 "--name-expression" -- "$JITK" compile --help
check "compile without input" 2 "no input file" -- "$JITK" compile
check "compile unknown option" 2 "unknown or incomplete option" -- "$JITK" compile good.cu --fast
check "compile sm_90 cubin" 0 "bytes of cubin for sm_90" -- "$JITK" compile good.cu --arch sm_90 --name-expression 'scale<float>' --name-expression 'scale<__half>'
[ -s good.cubin ] || { echo "FAIL: good.cubin not written"; fails=$((fails + 1)); }
check "resource table lists instantiations" 0 "scale<__half> (_Z5scaleI6__halfEvPT_S1_i)" -- "$JITK" compile good.cu --arch sm_90 --name-expression 'scale<__half>'
check "resource table shows shared memory" 0 "512 B" -- "$JITK" compile good.cu --arch sm_80
check "compile to PTX with -o" 0 "bytes of PTX for compute_90" -- "$JITK" compile good.cu --arch sm_90 --ptx -o out.ptx
grep -q ".target sm_90" out.ptx || { echo "FAIL: out.ptx is not PTX for sm_90"; fails=$((fails + 1)); }
check "defines reach NVRTC" 0 "cubin" -- "$JITK" compile good.cu --arch sm_90 -DUNUSED=1 --option -lineinfo
check "bad source exits 1 with NVRTC's message" 1 "bad.cu(1): error" -- "$JITK" compile bad.cu --arch sm_90
check "missing file" 1 "cannot read" -- "$JITK" compile nope.cu --arch sm_90
check "unknown arch" 1 "sm_XY" -- "$JITK" compile good.cu --arch gfx90a
check "unsupported arch" 1 "cannot compile for sm_35" -- "$JITK" compile good.cu --arch sm_35
check "-dlto is refused clearly" 1 'option "-dlto" is not supported' -- "$JITK" compile good.cu --arch sm_90 --option -dlto

# Elementwise kernels: generated and compiled without a GPU.
check "elementwise --help" 0 "--emit source" -- "$JITK" compile elementwise --help
check "elementwise float16 cubin" 0 "bytes of cubin for sm_90" -- "$JITK" compile elementwise --in 'T x, T y' --out 'T z' --op 'z = x + y' --type T=float16 --arch sm_90 -o add16.cubin
[ -s add16.cubin ] || { echo "FAIL: add16.cubin not written"; fails=$((fails + 1)); }
check "elementwise prints resource usage" 0 "registers" -- "$JITK" compile elementwise --in 'T x, T y' --out 'T z' --op 'z = x + y' --type T=float32 --arch sm_90 -o add.cubin
check "elementwise source has #line for the operation" 0 '#line 1 "operation"' -- "$JITK" compile elementwise --in 'T x, T y' --out 'T z' --op 'z = x + y' --type T=bfloat16 --emit source
check "elementwise vector path" 0 "vector path" -- "$JITK" compile elementwise --in 'T x, T y' --out 'T z' --op 'z = x + y' --type T=float32 --emit source
check "elementwise 64-bit index, 3 dimensions" 0 "3 dimensions, 64-bit index" -- "$JITK" compile elementwise --in 'T x, T y' --out 'T z' --op 'z = x + y' --type T=float32 --ndim 3 --index 64 --emit source
check "elementwise complex64 with a scalar" 0 "cubin" -- "$JITK" compile elementwise --in 'T a, T x' --out 'T z' --op 'z = a * exp(x)' --type T=complex64 --scalar a --arch sm_90 -o c64.cubin
check "elementwise PTX" 0 "bytes of PTX for compute_90" -- "$JITK" compile elementwise --in 'T x' --out 'T z' --op 'z = x * 2' --type T=float64 --arch sm_90 --emit ptx -o f64.ptx
check "elementwise bad list: caret and offset" 1 "in_params:1:8: .x. is already a parameter" -- "$JITK" compile elementwise --in 'T x, T x' --out 'T z' --op 'z = x' --type T=float32
check "elementwise raw output: a writable descriptor" 0 'jitk::array<T, 1> z' -- "$JITK" compile elementwise --in 'raw T x, raw T y' --out 'raw T z' --op 'z[i] = x[i] + y[i]' --type T=float32 --emit source
check "elementwise raw output compiles" 0 "bytes of cubin for sm_90" -- "$JITK" compile elementwise --in 'T x' --out 'raw T z, T w' --op 'z[i] = x; w = x' --type T=float16 --arch sm_90 -o rawout.cubin
check "elementwise reserved name" 1 "reserved" -- "$JITK" compile elementwise --in 'T i' --out 'T z' --op 'z = i' --type T=float32
check "elementwise unknown dtype" 1 "float128" -- "$JITK" compile elementwise --in 'float128 x' --out 'float128 z' --op 'z = x'
check "elementwise unbound placeholder" 1 "T" -- "$JITK" compile elementwise --in 'T x' --out 'T z' --op 'z = x'
check "elementwise error cites the user's operation" 1 'operation:1:9: error: identifier "q" is undefined' -- "$JITK" compile elementwise --in 'T x, T y' --out 'T z' --op 'z = x + q' --type T=float32
check "elementwise missing --op" 2 "usage" -- "$JITK" compile elementwise --in 'T x' --out 'T z'
# Issue 11: a #line of the user's once made the log rewriting read past a
# line of NVRTC's log and corrupt the heap; such directives are refused.
op=$(printf 'z = x;\n#line 1 "map_expr(\\n\\n5):w"\nz = qq;')
check "elementwise #line in the operation is refused" 1 'operation:2:1: #line directives are not allowed' -- env JITK_CACHE=off "$JITK" compile elementwise --in 'T x' --out 'T z' --op "$op" --type T=float32
check "elementwise error at the operation's end cites it" 1 'operation:1:8: error: expected an expression' -- "$JITK" compile elementwise --in 'T x' --out 'T z' --op 'z = x +' --type T=float32
check "elementwise --vector 3 is refused by the library" 1 'vector is 3' -- "$JITK" compile elementwise --in 'T x' --out 'T z' --op 'z = x' --type T=float32 --vector 3
check "elementwise --vector must be a number" 2 "'four' is not a valid value for --vector" -- "$JITK" compile elementwise --in 'T x' --out 'T z' --op 'z = x' --type T=float32 --vector four
check "elementwise duplicate --type" 1 'placeholder T is bound twice' -- "$JITK" compile elementwise --in 'T x' --out 'T z' --op 'z = x' --type T=float32 --type T=float64
check "elementwise unknown --scalar" 1 'has no parameter .q.' -- "$JITK" compile elementwise --in 'T x' --out 'T z' --op 'z = x' --type T=float32 --scalar q

# Reduction kernels: generated and compiled without a GPU.
check "reduction --help" 0 "--post-map" -- "$JITK" compile reduction --help
check "reduction float32 sum of squares cubin" 0 "bytes of cubin for sm_90" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x * x' --reduce 'a + b' --post-map 'y = a' --identity 0 --type T=float32 --arch sm_90 -o sumsq.cubin
[ -s sumsq.cubin ] || { echo "FAIL: sumsq.cubin not written"; fails=$((fails + 1)); }
check "reduction prints resource usage" 0 "registers" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x * x' --reduce 'a + b' --post-map 'y = a' --identity 0 --type T=float32 --arch sm_90 -o sumsq.cubin
check "reduction source has #line for the map expression" 0 '#line 1 "map_expr"' -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x * x' --reduce 'a + b' --post-map 'y = a' --identity 0 --type T=float32 --emit source
check "reduction float16 input, float32 reduce type" 0 "bytes of cubin for sm_90" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x' --reduce 'a + b' --post-map 'y = (T)a' --identity 0 --reduce-type float32 --type T=float16 --arch sm_90 -o sum16.cubin
check "reduction complex64" 0 "bytes of cubin for sm_90" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x * x' --reduce 'a + b' --post-map 'y = a' --identity 0 --type T=complex64 --arch sm_90 -o c64sum.cubin
check "reduction across outputs, one kept dimension" 0 "bytes of cubin for sm_90" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x' --reduce 'max(a, b)' --post-map 'y = a' --type T=float32 --kept-ndim 1 --strategy o --arch sm_90 -o colmax.cubin
check "reduction 64-bit index, 2 reduced dimensions" 0 "bytes of PTX for compute_90" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x' --reduce 'a + b' --post-map 'y = a' --identity 0 --type T=float64 --reduced-ndim 2 --index 64 --arch sm_90 --emit ptx -o sum64.ptx
check "reduction error cites the user's map expression" 1 "map_expr:1:" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x * * )' --reduce 'a + b' --post-map 'y = a' --type T=float32 --arch sm_90
check "reduction bad list: caret and offset" 1 "in_params:1:8: .x. is already a parameter" -- "$JITK" compile reduction --in 'T x, T x' --out 'T y' --map 'x' --reduce 'a + b' --post-map 'y = a' --type T=float32
grep -q '^ *\^' err.txt || { echo "FAIL: reduction bad list: no caret line"; cat err.txt; fails=$((fails + 1)); }
check "reduction error at the map expression's end cites it" 1 'map_expr:1:4: error: expected an expression' -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x +' --reduce 'a + b' --post-map 'y = a' --type T=float32 --arch sm_90
check "reduction raw output refused" 1 "reduction outputs cannot be raw" -- "$JITK" compile reduction --in 'T x' --out 'raw T y' --map 'x' --reduce 'a + b' --post-map 'y = a' --type T=float32
check "reduction missing --post-map" 2 "usage" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x' --reduce 'a + b'
check "reduction unknown strategy" 2 "--strategy is i, o, m or r" -- "$JITK" compile reduction --in 'T x' --out 'T y' --map 'x' --reduce 'a + b' --post-map 'y = a' --strategy inner

# Matmul plans: planned, generated and compiled without a GPU.
check "matmul --help" 0 "--epilogue" -- "$JITK" compile matmul --help
check "matmul bf16 4096^3 bias+ReLU plan for sm_90" 0 "compiled for sm_90" -- "$JITK" compile matmul --m 4096 --n 4096 --k 4096 --a bfloat16 --b bfloat16 --d bfloat16 --epilogue 'max(acc + bias[col], (T)0)' --params 'raw T bias' --arch sm_90
grep -q '^plan: .' out.txt || { echo "FAIL: matmul plan: no description"; cat out.txt; fails=$((fails + 1)); }
check "matmul plan for --arch sm_90a" 0 "compiled for sm_90a" -- "$JITK" compile matmul --m 256 --n 256 --k 256 --a bfloat16 --b bfloat16 --d bfloat16 --arch sm_90a
grep -qx 'compiled for sm_90a' out.txt || { echo "FAIL: matmul --arch sm_90a: the target is not printed as given"; cat out.txt; fails=$((fails + 1)); }
check "matmul source has #line for the epilogue" 0 '#line 1 "epilogue"' -- "$JITK" compile matmul --m 4096 --n 4096 --k 4096 --a bfloat16 --b bfloat16 --d bfloat16 --epilogue 'max(acc + bias[col], (T)0)' --params 'raw T bias' --arch sm_90 --emit source
check "matmul epilogue syntax error cites the epilogue" 1 "epilogue:1:" -- "$JITK" compile matmul --m 4096 --n 4096 --k 4096 --a bfloat16 --b bfloat16 --d bfloat16 --epilogue 'acc + * )' --params 'raw T bias' --arch sm_90
check "matmul missing --k" 2 "usage" -- "$JITK" compile matmul --m 64 --n 64
check "matmul layout past 2^63 bytes" 1 'spans more than 2^63 bytes' -- "$JITK" compile matmul --m 3037000500 --n 3037000500 --k 16 --batch 4
check "matmul --alpha nan" 1 'alpha is nan; it must be a finite number' -- "$JITK" compile matmul --m 64 --n 64 --k 64 --alpha nan
check "matmul writes no cubin" 2 "--emit is describe or source" -- "$JITK" compile matmul --m 64 --n 64 --k 64 --emit cubin
check "matmul unknown dtype" 2 "not a valid value" -- "$JITK" compile matmul --m 64 --n 64 --k 64 --a float128
check "matmul fp8 promotes by default" 0 "sum promoted to a separate float32 sum" -- "$JITK" compile matmul --m 256 --n 256 --k 8192 --a float8_e4m3fn --b float8_e4m3fn --d bfloat16 --order-b col --arch sm_90
check "matmul fp8 fast accumulation" 0 "fast: the tensor cores" -- "$JITK" compile matmul --m 256 --n 256 --k 8192 --a float8_e4m3fn --b float8_e4m3fn --d bfloat16 --order-b col --compute float32_fast_accum --arch sm_90

# The kernel cache, through the CLI, from a fresh folder.
JITK_CACHE_DIR="$WORK/cache2"
check "cache --help" 0 "export FILE" -- "$JITK" cache --help
check "cache unknown command" 2 "unknown command" -- "$JITK" cache frob
check "cache path" 0 "state:    on" -- "$JITK" cache path
check "compile fills the cache" 0 "cubin" -- "$JITK" compile good.cu --arch sm_80
check "a second compile is a disk hit" 0 "cubin" -- "$JITK" compile good.cu --arch sm_80
check "cache stats" 0 "disk hits:    1" -- "$JITK" cache stats
check "cache stats --json" 0 '"compiles": ' -- "$JITK" cache stats --json
check "cache ls" 0 "good.cu" -- "$JITK" cache ls
check "compile --no-cache" 0 "cubin" -- "$JITK" compile good.cu --arch sm_90 --no-cache
check "--no-cache stored nothing" 0 "entries:      1 " -- "$JITK" cache stats
check "cache verify" 0 "removed 0 bad" -- "$JITK" cache verify
check "cache export" 0 "exported 1 entry " -- "$JITK" cache export "$WORK/export.db"
check "cache export refuses to overwrite" 1 "exists already" -- "$JITK" cache export "$WORK/export.db"
check "cache prune" 0 "removed" -- "$JITK" cache prune --max-size 1K
check "cache prune bad size" 2 "not a size" -- "$JITK" cache prune --max-size lots
check "cache clear" 0 "removed" -- "$JITK" cache clear
check "cache import" 0 "imported 1 entry " -- "$JITK" cache import "$WORK/export.db"
check "cache import without a file" 2 "which FILE" -- "$JITK" cache import
check "cache in another folder" 0 "the cache is empty" -- "$JITK" cache ls --dir "$WORK/other"
mkdir -p "$WORK/open" && chmod 777 "$WORK/open"
check "an unsafe folder is refused" 1 "writable by everyone" -- "$JITK" cache ls --dir "$WORK/open"
# An export holds kernel sources: private whatever the umask.
(umask 000 && "$JITK" cache export "$WORK/export2.db" >/dev/null 2>&1)
check "cache export is private" 0 "600" -- stat -c %a "$WORK/export2.db"
check "cache prune refuses inf" 2 "not a size" -- "$JITK" cache prune --max-size inf
check "cache prune refuses 1e30" 2 "not a size" -- "$JITK" cache prune --max-size 1e30

# A header edited between two compiles: a new kernel, never the old one
# (issue 11's reproduction).
mkdir -p inc
echo '#define VALUE 111' > inc/h.cuh
printf '#include "h.cuh"\nextern "C" __global__ void k(int *p){ *p = VALUE; }\n' > hk.cu
check "compile with a header" 0 "cubin" -- "$JITK" compile hk.cu --arch sm_90 -Iinc -o one.cubin
echo '#define VALUE 222' > inc/h.cuh
check "compile after editing it" 0 "cubin" -- "$JITK" compile hk.cu --arch sm_90 -Iinc -o two.cubin
if cmp -s one.cubin two.cubin; then
  echo "FAIL: an edited header was served from the cache"; fails=$((fails + 1))
else
  echo "ok: an edited header makes a new kernel"
fi

# A shared cache published by its owner (this user here) and read.
check "cache publish" 0 "published" -- "$JITK" cache publish "$WORK/pub"
check "cache publish without a folder" 2 "which DIR" -- "$JITK" cache publish
check "the published database is readable by all" 0 "644" -- stat -c %a "$WORK/pub/kernels.db"
check "cache path names the shared cache" 0 "shared state: on" -- \
  env JITK_CACHE_SHARED_DIR="$WORK/pub" "$JITK" cache path --dir "$WORK/reader"
check "a shared cache serves the reader" 0 "cubin" -- \
  env JITK_CACHE_SHARED_DIR="$WORK/pub" JITK_CACHE_DIR="$WORK/reader" \
  "$JITK" compile hk.cu --arch sm_90 -Iinc -o three.cubin
if cmp -s two.cubin three.cubin; then echo "ok: the shared entry is the same kernel"; else
  echo "FAIL: the shared cache served another kernel"; fails=$((fails + 1)); fi

# A run recorded into a manifest, then warmed into a fresh cache (issue 15).
check "a recording run" 0 "cubin" -- env JITK_CACHE_RECORD="$WORK/m.jsonl" \
  "$JITK" compile elementwise --in 'T x, T y' --out 'T z' --op 'z = x + y' --type T=float16
env JITK_CACHE_RECORD="$WORK/m.jsonl" "$JITK" compile good.cu --arch sm_90 >/dev/null 2>&1
env JITK_CACHE_RECORD="$WORK/m.jsonl" "$JITK" compile hk.cu --arch sm_90 -Iinc >/dev/null 2>&1
check "the manifest is private" 0 "600" -- stat -c %a "$WORK/m.jsonl"
check "cache warm" 0 "sm_90: 3 kernels: 3 compiled, 0 already cached, 0 failed" -- \
  "$JITK" cache warm "$WORK/m.jsonl" --dir "$WORK/warmed" --threads 2
check "cache warm again" 0 "0 compiled, 3 already cached" -- \
  "$JITK" cache warm "$WORK/m.jsonl" --dir "$WORK/warmed"
check "the warmed cache serves the run" 0 "cubin" -- env JITK_CACHE_DIR="$WORK/warmed" \
  "$JITK" compile hk.cu --arch sm_90 -Iinc
# The warm-up's 3 compiles, and 3 + 1 disk hits: the second warm-up's and the run's.
check "with no compile" 0 "disk hits:    4" -- "$JITK" cache stats --dir "$WORK/warmed"
check "but the warm-up's" 0 "compiles:     3 " -- "$JITK" cache stats --dir "$WORK/warmed"
echo "garbage" >>"$WORK/m.jsonl"
echo '#define VALUE not C++' >inc/h.cuh
check "cache warm with a damaged line and a kernel that no longer compiles" 1 \
  "m.jsonl:4: not a manifest record; skipped" -- \
  "$JITK" cache warm "$WORK/m.jsonl" --dir "$WORK/warmed2"
grep -q "does not compile now" err.txt && grep -q "2 compiled, 0 already cached, 1 failed" out.txt &&
  echo "ok: the broken kernel is named, the others warmed" ||
  { echo "FAIL: cache warm's report"; cat out.txt err.txt; fails=$((fails + 1)); }
check "cache warm for a target not recorded" 1 "records no kernels for sm_80" -- \
  "$JITK" cache warm "$WORK/m.jsonl" --dir "$WORK/warmed2" --arch sm_80
check "cache warm of a missing file" 1 "cannot read" -- "$JITK" cache warm "$WORK/none.jsonl"
check "cache warm of a folder" 1 "cannot read" -- "$JITK" cache warm "$WORK"
# A FIFO is refused at once, not read until some writer comes (the
# timeout turns a hang into a failure).
mkfifo "$WORK/fifo.jsonl"
check "cache warm of a FIFO" 1 "not a regular file" -- \
  timeout 20 "$JITK" cache warm "$WORK/fifo.jsonl"
# A target no engine can take, recorded first: named, and the others warmed.
{ echo '{"target":"sm_bogus"}'; cat "$WORK/m.jsonl"; } >"$WORK/m2.jsonl"
check "cache warm past a target no engine takes" 1 "sm_90: 3 kernels" -- \
  "$JITK" cache warm "$WORK/m2.jsonl" --dir "$WORK/warmed3"
check "cache prune to nothing" 2 "cache clear" -- "$JITK" cache prune --max-size 0
check "cache warm without a file" 2 "which manifest FILE" -- "$JITK" cache warm
check "cache warm --threads 0" 2 "not a number from 1 to 1024" -- \
  "$JITK" cache warm "$WORK/m.jsonl" --threads 0
check "cache warm --remote-only without a remote" 2 "needs a remote tier" -- \
  env -u JITK_CACHE_REMOTE "$JITK" cache warm "$WORK/m.jsonl" --remote-only

if [ "$fails" -ne 0 ]; then echo "$fails CLI check(s) failed"; exit 1; fi
echo "all CLI checks passed"
