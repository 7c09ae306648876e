# v27 final check (committed build e5dda6e+: dynamic B-multicast pairs and the pair tail split in GEMM1):
# the whole GPU suite, sanitizers on the new test, GEMM1's gather test and the layer, the fill probe,
# bench gemm, bench grouped (with cuBLASLt and cool-downs), the main job, three rounds of DeepGEMM's
# masked rows.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='MoeGemm1Swiglu.PairTailSplitIsBitIdentical:MoeGemm1Swiglu.GatherMatchesPermuted:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='MoeGemm1Swiglu.PairTailSplitIsBitIdentical' MEMCHECK_TIMEOUT=240 RACECHECK_TIMEOUT=200 \
  session_final moekit_fill_probe "head -8"
