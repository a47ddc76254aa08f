set -u
B=$PWD/gpu-bundle
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 CUDA_HOME=/usr/local/cuda
cd $B/bin
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section Occupancy"
JITK_CACHE_DIR=$(mktemp -d) timeout 200 ncu --clock-control none -k 'regex:^matmul$' --launch-skip 6 --launch-count 1 $S ./jitk-bench matmul --only fp8 > $OUT/fp8_promoted.txt 2>&1
JITK_CACHE_DIR=$(mktemp -d) timeout 200 ncu --clock-control none -k "regex:^matmul_fast$" --launch-skip 6 --launch-count 1 $S ./jitk-bench matmul --only fp8 > $OUT/fp8_fast.txt 2>&1
for shp in 8192x50257x1024 8192x50264x1024; do
JITK_CACHE_DIR=$(mktemp -d) timeout 150 ncu --clock-control none -k 'regex:^matmul$' --launch-skip 4 --launch-count 1 $S ./jitk-bench matmul --shapes $shp > $OUT/vocab_$shp.txt 2>&1
done
ls -la $OUT; grep -E "Duration|DRAM Throughput|Memory \[%\]" $OUT/*.txt | head -20
