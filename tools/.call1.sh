#!/bin/bash
# Call 1: cold compiles first on the fresh machine, then reductions and matmul.
ONLY='^(bench_compile|bench_compile2)$' gpu-bundle/run.sh > $OUT/part1.txt 2>&1
ONLY='^(test_gpu_reduction|test_gpu_matmul|memcheck_reduction|bench_reduction|bench_matmul|bench_sweep|peer_compile)$' gpu-bundle/run.sh > $OUT/part2.txt 2>&1
grep -E "^=== |FAIL|Synthesis" $OUT/part1.txt $OUT/part2.txt | head -60
grep -E "x bare|baseline|first process" $OUT/bench_compile.log $OUT/bench_compile2.log | cut -c1-200
