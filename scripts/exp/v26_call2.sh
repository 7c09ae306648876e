# v26 device call 2: GEMM1 in 128 x 256 tiles (two warpgroups along M, two column slices each): the
# GEMM1 / layer tests, then the prefill A/B against the 64-row tile (MOEKIT_GEMM1_TILE_M=64), two
# interleaved rounds.
# (MOEKIT_GEMM1_TILE_M and the 128-row GEMM1 tile exist only in commit dfd4570, reverted after these calls;
# this call ran an earlier form of it, two 128-column slices per warpgroup run serially, which dfd4570
# replaced by the pipelined quarter chains of call 4.)
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer*:MoeGemm2*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
grep -E "GEMM1 codes off" $OUT/gpu_tests.log
for r in 1 2; do
  for v in 128 64; do
    MOEKIT_GEMM1_TILE_M=$v timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline > $OUT/moe_$v$r.txt 2>&1
    echo "m$v r$r: $(moe_summary $OUT/moe_$v$r.txt) rel_l2 $(awk '$1 ~ /^deepseek/ {printf "%s ", $4}' $OUT/moe_$v$r.txt)"
  done
done
grep -h "^preset\|^deepseek\|^# stages" $OUT/moe_1281.txt | cut -c1-200 | head -8
echo "total $(( $(date +%s) - t0 )) s"
