# v22 device call 3: the MoE GEMM2 (scatter-add epilogue) as 256-row tiles in pairs sharing A.
# MoE tests with GEMM2 forced to m256n128s4 c2, then an A/B of the main job at T = 4096 / 16384:
# GEMM2 default vs forced m256n128s4 c1 vs c2, two rounds.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
source scripts/exp/bench_lib.sh
t0=$(date +%s)
MOEKIT_MOE_GEMM2_CONFIG=m256n128s4g8x132c2 timeout 200 ./build/moekit_gpu_tests --gtest_filter='MoeLayer*:MoeGemm2*' > $OUT/moe_tests_c2.log 2>&1
echo "moe tests with GEMM2 m256 c2: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/moe_tests_c2.log | tr '\n' ' ')"
grep -E "Failure|FAILED  \]" $OUT/moe_tests_c2.log | head -5
echo "after tests $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  for cfg in default m256n128s4g8x132c1 m256n128s4g8x132c2; do
    if [ $cfg = default ]; then unset MOEKIT_MOE_GEMM2_CONFIG; else export MOEKIT_MOE_GEMM2_CONFIG=$cfg; fi
    MOEKIT_LOG_CONFIG=$([ $r = 1 ] && echo 1 || echo 0) timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline > $OUT/moe_${cfg}_r$r.txt 2>&1
    echo "moe $cfg r$r: $(moe_summary $OUT/moe_${cfg}_r$r.txt)"
    [ $r = 1 ] && grep "moe_gemm2" $OUT/moe_${cfg}_r$r.txt | sort | uniq -c | head -3
  done
done
unset MOEKIT_MOE_GEMM2_CONFIG
echo "total $(( $(date +%s) - t0 )) s"
