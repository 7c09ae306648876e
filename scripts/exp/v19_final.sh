# v19 device call: dense GEMM tests and bench gemm (cuBLASLt) with the final heuristic.
GTEST_FILTER='GemmFp8.*'
source scripts/exp/gpu_suite.sh
timeout 200 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
grep -E "^ *[0-9]+ |geomean|bandwidth" $OUT/bench_gemm.txt | cut -c1-150
timeout 60 ./build/moekit bench gemm --shapes 1:2112:7168,16:2112:7168,1:4096:7168,1:7168:2048,32:2112:7168 > $OUT/bench_gemm_small.txt 2>&1
grep -E "^ *[0-9]+ " $OUT/bench_gemm_small.txt | cut -c1-150
echo "total $(( $(date +%s) - t0 )) s"
