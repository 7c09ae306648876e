# v22 final check, part 1 (committed build): the whole GPU suite, bench gemm, bench grouped (with
# cuBLASLt and cool-downs) and the main job (bench moe --preset deepseek-v3).
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
main_benches
echo "total $(( $(date +%s) - t0 )) s"
