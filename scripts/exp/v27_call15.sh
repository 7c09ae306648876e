# v27 device calls 15 and 17: a check of the last kernel change (call 15: commit 7a051ee, PairClaims reads its word through ld_shared_f32; call 17: HEAD after comment-only kernel-header edits) — the GEMM1,
# layer and grouped tests, and the main job at T = 1, 4096, 16384.
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer.*:GroupedGemm*' source scripts/exp/gpu_suite.sh
timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 1,4096,16384 --no-baseline > $OUT/moe.txt 2>&1
grep -E '^deepseek|# stages deepseek-v3 T=16384' $OUT/moe.txt | cut -c1-130
echo "total $(( $(date +%s) - t0 )) s"
