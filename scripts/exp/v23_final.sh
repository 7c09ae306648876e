# v23 final check (committed build: the per-tile trace is the only kernel change): the whole GPU
# suite, bench gemm, bench grouped (with cuBLASLt and cool-downs), the main job, then three more
# rounds of DeepGEMM's masked rows alone (their spread between rounds) and one traced launch.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
final_check
echo "total $(( $(date +%s) - t0 )) s"
