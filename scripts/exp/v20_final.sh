# v20 final device call on the final commit: the whole GPU suite, then bench gemm, bench grouped
# and the main job (all with cuBLASLt, cool-downs on).
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
main_benches
echo "total $(( $(date +%s) - t0 )) s"
