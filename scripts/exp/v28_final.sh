# v28 final check (committed build: the SwiGLU epilogue on bare MUFU ex2 / rcp): the whole GPU suite,
# sanitizers on GEMM1 tests and the layer (gpt-oss: the clamp), bench gemm, bench grouped (with cuBLASLt and cool-downs),
# the main job, three rounds of DeepGEMM's masked rows.
# (Call 7 ran this as sanitize + final_check + the total line, which session_final now does; same commands.)
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='MoeGemm1Swiglu.PairTailSplitIsBitIdentical:MoeGemm1Swiglu.GatherMatchesPermuted:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='MoeGemm1Swiglu.PairTailSplitIsBitIdentical' MEMCHECK_TIMEOUT=240 RACECHECK_TIMEOUT=200 session_final
