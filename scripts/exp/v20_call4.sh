# v20 device call 4: tail halves A/B on the masked cases (MOEKIT_TAIL_HALVES=0 / 1, two rounds),
# then bench grouped, bench gemm and the main job with the final build.
SKIP_TESTS=1
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
halves_ab 1 2
main_benches
echo "total $(( $(date +%s) - t0 )) s"
