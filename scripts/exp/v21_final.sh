# v21 final check, part 1 (committed build): the whole GPU suite, bench gemm and bench grouped (with
# cuBLASLt and cool-downs).
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
gemm_grouped_benches
echo "total $(( $(date +%s) - t0 )) s"
