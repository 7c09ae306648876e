# v21 final check, part 1 (committed build): the whole GPU suite, bench gemm and bench grouped (with
# cuBLASLt and cool-downs).
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
timeout 200 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
show_gemm $OUT/bench_gemm.txt
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
show_grouped $OUT/bench_grouped.txt
echo "total $(( $(date +%s) - t0 )) s"
