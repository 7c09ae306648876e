# v24 final check (committed build: the kernels are v23's; every change tried in v24 was removed):
# the whole GPU suite, bench gemm, bench grouped (with cuBLASLt and cool-downs), the main job, then
# three more rounds of DeepGEMM's masked rows alone and one traced launch.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
final_check
echo "total $(( $(date +%s) - t0 )) s"
