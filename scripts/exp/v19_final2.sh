# v19 final device call on the committed build: GPU suite, bench gemm, main job.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
timeout 120 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
grep -E "^ *[0-9]+ |geomean|bandwidth" $OUT/bench_gemm.txt | cut -c1-150
timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
grep -E "^deepseek|^# stages|^preset" $OUT/bench_moe.txt | cut -c1-150
echo "total $(( $(date +%s) - t0 )) s"
