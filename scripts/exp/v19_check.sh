# v19 device call: GPU suite, split-K sweep check, bench gemm (cuBLASLt), main job, sanitizers on split-K.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
timeout 120 ./build/moekit bench gemm --no-baseline --sweep --shapes 1:2112:7168,64:2112:7168,128:2112:7168,64:4096:7168 > $OUT/sweep2.txt 2>&1
grep -E "best|clusters" $OUT/sweep2.txt
grep -E "k[0-9] " $OUT/sweep2.txt | sort -k5 -g | head -12
main_benches
MEMCHECK_FILTER='GemmFp8.SplitKValidation:GemmFp8.CudaGraphReplay' RACECHECK_FILTER='GemmFp8.SplitKValidation' sanitize
echo "total $(( $(date +%s) - t0 )) s"
