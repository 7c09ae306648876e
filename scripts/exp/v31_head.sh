# v31 last call: HEAD's build (src/include/tests identical to 068a4b1): the whole GPU suite, bench grouped, main job at T = 1 and 16384.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
timeout 120 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1; show_grouped $OUT/bench_grouped.txt
timeout 120 ./build/moekit bench moe --preset deepseek-v3 --tokens 1,16384 --no-baseline > $OUT/bench_moe.txt 2>&1; show_moe $OUT/bench_moe.txt
echo "total $(( $(date +%s) - t0 )) s"
