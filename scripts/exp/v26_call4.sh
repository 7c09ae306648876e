# v26 device call 4: GEMM1's 128 x 256 tile with the pipelined quarter chains (m64n64, promoted under
# the next chain): the GEMM1 / layer tests, then the prefill A/B against the 64-row tile
# (MOEKIT_GEMM1_TILE_M=64), two interleaved rounds at T = 4096, 8192, 16384.
# (MOEKIT_GEMM1_TILE_M and the 128-row GEMM1 tile exist only in commit dfd4570, reverted after these calls.)
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer*:MoeGemm2*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
grep -E "GEMM1 codes off" $OUT/gpu_tests.log
for r in 1 2; do
  for v in 128 64; do
    MOEKIT_GEMM1_TILE_M=$v timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,8192,16384 --no-baseline > $OUT/moe_$v$r.txt 2>&1
    echo "m$v r$r: $(awk '$1 ~ /^deepseek/ {printf "T=%s %s | ", $2, $5}' $OUT/moe_$v$r.txt) GEMM1: $(grep -h '^# stages' $OUT/moe_$v$r.txt | sed -E 's/.*T=([0-9]+).*gemm1_swiglu ([0-9.]+).*/\1:\2/' | tr '\n' ' ')"
  done
done
grep -h "^# stages" $OUT/moe_1281.txt | cut -c1-200
echo "total $(( $(date +%s) - t0 )) s"
