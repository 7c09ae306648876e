# v28 final check (committed build: the SwiGLU epilogue on bare MUFU ex2 / rcp): the whole GPU suite,
# sanitizers on GEMM1 tests and the layer (gpt-oss: the clamp), bench gemm, bench grouped (with cuBLASLt and cool-downs),
# the main job, three rounds of DeepGEMM's masked rows.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='MoeGemm1Swiglu.PairTailSplitIsBitIdentical:MoeGemm1Swiglu.GatherMatchesPermuted:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='MoeGemm1Swiglu.PairTailSplitIsBitIdentical' MEMCHECK_TIMEOUT=240 RACECHECK_TIMEOUT=200 sanitize
final_check
echo "total $(( $(date +%s) - t0 )) s"
