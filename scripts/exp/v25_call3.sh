# v25 device call 3: the permute pass with each token's scales stored once and gathered by row
# (detail::TokenScales): tests, sanitizers on the new kernels, and the main job's prefill A/B against
# the per-slot scale stores (MOEKIT_TMP_TS0=1, a temporary switch removed after the call), three interleaved rounds.
GTEST_FILTER='PermuteQuantize*:MoeSortGpu*:SortQuantizeFusedGpu*:RouteSortFusedGpu*:MoeLayer*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='PermuteQuantizeByToken.*:MoeLayer.GatheredAndPermutedActivationsAreBitIdentical' \
RACECHECK_FILTER='PermuteQuantizeByToken.MatchesTwoKernelPath' MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 sanitize
for r in 1 2 3; do
  for v in new old; do
    if [ $v = old ]; then export MOEKIT_TMP_TS0=1; else unset MOEKIT_TMP_TS0; fi
    timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline > $OUT/moe_$v$r.txt 2>&1
    echo "$v r$r: $(moe_summary $OUT/moe_$v$r.txt) rel_l2 $(awk '$1 ~ /^deepseek/ {printf "%s ", $4}' $OUT/moe_$v$r.txt)"
  done
done
unset MOEKIT_TMP_TS0
grep -h "^preset\|^deepseek" $OUT/moe_new1.txt | head -4
echo "total $(( $(date +%s) - t0 )) s"
