# v29 final check (kernels unchanged since c1facba; new: --data, the normal fills and their test): the whole GPU
# suite, memcheck on the fills' test and the layer, racecheck on GEMM1's pair tail split, bench gemm / grouped / the
# main job (uniform data, as every earlier session), three rounds of DeepGEMM's masked rows; then bench grouped and
# the main job on --data normal.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='RandomFill.*:MoeLayer.PresetsMatchSpecReference' RACECHECK_FILTER='MoeGemm1Swiglu.PairTailSplitIsBitIdentical' \
MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 session_final
timeout 200 ./build/moekit bench grouped --data normal > $OUT/bench_grouped_normal.txt 2>&1
echo "== bench grouped --data normal"; show_grouped $OUT/bench_grouped_normal.txt
timeout 200 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --data normal > $OUT/bench_moe_normal.txt 2>&1
echo "== bench moe --data normal"; show_moe $OUT/bench_moe_normal.txt
echo "total $(( $(date +%s) - t0 )) s"
