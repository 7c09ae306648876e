# v28 device call 9: the layer's energy by stage (bench moe --energy, deepseek-v3 T = 4096 and 16384):
# default twice (the spread), and with one stage not launched (MOEKIT_DIAG_SKIP; results wrong, and the
# stages after a skipped one run on stale data). Also the layer tests after MOEKIT_DIAG_SKIP learned the
# rows path's gemm2_rows and combine.
GTEST_FILTER='MoeLayer.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for v in "MOEKIT_X=0" "MOEKIT_DIAG_SKIP=gemm2_rows" "MOEKIT_DIAG_SKIP=combine" "MOEKIT_DIAG_SKIP=permute_quant" \
         "MOEKIT_DIAG_SKIP=gemm2_rows,combine" "MOEKIT_X=1"; do
  energy_round $v 4096,16384
done
echo "total $(( $(date +%s) - t0 )) s"
