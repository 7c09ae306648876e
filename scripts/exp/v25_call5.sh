# v25 device call 5 (as call 4, after the scale gather went to a thread per row and 8 K blocks): the token-scale permute at the sizes around its threshold (T * k >= 4096), A/B with
# MOEKIT_TMP_TS0=1 (per-slot scale stores; a temporary switch, removed after the call): two interleaved rounds, all threshold
# sides: deepseek-v3, gpt-oss-120b (k = 4) and mixtral-8x7b (k = 2), layer us and the permute stage.
GTEST_FILTER="PermuteQuantizeByToken.*:MoeLayer.GatheredAndPermutedActivationsAreBitIdentical" source scripts/exp/gpu_suite.sh
V25_SUITE_DONE=1 source scripts/exp/v25_call4.sh
