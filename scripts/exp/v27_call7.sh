# v27 device call 7: GEMM1's pair tail split (GemmParams::pair_tail_split). Tests of the MoE GEMMs
# and the layer, then A/B against MOEKIT_GEMM1_TAIL_SPLIT=0 at T = 4096 and 16384 (interleaved).
GTEST_FILTER='MoeGemm1Swiglu.*:MoeGemm2Scatter.*:MoeLayer.*:GroupedGemm*' source scripts/exp/gpu_suite.sh
for r in 1 2 3; do
  for v in 1 0; do
    MOEKIT_GEMM1_TAIL_SPLIT=$v timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline --no-check > $OUT/ab_${v}_r$r.txt 2>&1
    echo "split=$v r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/ab_${v}_r$r.txt)"
    grep '# stages' $OUT/ab_${v}_r$r.txt | sed 's/.*T=\([0-9]*\) (us): .*gemm1_swiglu \([0-9.]*\), gemm2_rows \([0-9.]*\).*/   T=\1 gemm1 \2 gemm2 \3/'
  done
done
timeout 300 ./build/moekit bench moe --preset deepseek-v3 --tokens 64,1000,4096 --no-baseline > $OUT/check.txt 2>&1
grep -E '^deepseek' $OUT/check.txt | cut -c1-60
echo "total $(( $(date +%s) - t0 )) s"
