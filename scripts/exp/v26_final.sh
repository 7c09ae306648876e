# v26 final check (committed build: the library's kernels are v25's; v26 added the probe's modes 9-11 and
# ptx::bulk_load): the whole GPU suite, sanitizers on the MoE GEMMs and the layer, the wgmma probe, bench
# gemm, bench grouped (with cuBLASLt and cool-downs), the main job, three rounds of DeepGEMM's masked rows.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='MoeGemm1Swiglu.GatherMatchesPermuted:MoeGemm2Scatter.*:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='MoeGemm1Swiglu.GatherMatchesPermuted' MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 sanitize
(cd build && timeout 60 ./moekit_wgmma_probe) > $OUT/probe.txt 2>&1
tail -19 $OUT/probe.txt
final_check
echo "total $(( $(date +%s) - t0 )) s"
