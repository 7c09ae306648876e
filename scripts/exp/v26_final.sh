# v26 final check (committed build: the library's kernels are v25's; v26 added the probe's modes 9-11 and
# ptx::bulk_load): the whole GPU suite, sanitizers on the MoE GEMMs and the layer, the wgmma probe, bench
# gemm, bench grouped (with cuBLASLt and cool-downs), the main job, three rounds of DeepGEMM's masked rows.
# (Since v27 through bench_lib.sh's session_final; the commands run are the same.)
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='MoeGemm1Swiglu.GatherMatchesPermuted:MoeGemm2Scatter.*:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='MoeGemm1Swiglu.GatherMatchesPermuted' MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 \
  session_final moekit_wgmma_probe "tail -19"
