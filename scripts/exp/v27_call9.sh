# v27 device call 9: dynamic units for GEMM1's B-multicast pairs (PairClaims) with and without the
# pair tail split. Tests, then A/B/C/D at T = 4096 and 16384, interleaved:
#   s1d1 = split + dynamic pairs (new default), s0d1 = dynamic pairs only, s0d0 = v26 (static, no split),
#   s1d0 = split with static pairs (call 7's slow form).
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer.*:GroupedGemm*' source scripts/exp/gpu_suite.sh
run() {  # TAG SPLIT DYN ROUND
  local dyn=""; [ "$3" = 0 ] && dyn=g2
  MOEKIT_GEMM1_TAIL_SPLIT=$2 MOEKIT_MOE_DYNAMIC=$dyn timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline --no-check > $OUT/ab_$1_r$4.txt 2>&1
  echo "$1 r$4: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/ab_$1_r$4.txt) $(grep '# stages' $OUT/ab_$1_r$4.txt | sed 's/.*T=\([0-9]*\) (us): .*gemm1_swiglu \([0-9.]*\), gemm2_rows \([0-9.]*\).*/[T=\1 g1 \2 g2 \3]/' | tr '\n' ' ')"
}
for r in 1 2; do
  run s1d1 1 1 $r; run s0d1 0 1 $r; run s0d0 0 0 $r
done
run s1d0 1 0 1
echo "total $(( $(date +%s) - t0 )) s"
