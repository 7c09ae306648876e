# v32 final check, part 2 (HEAD's build): bench gemm / grouped / the main job, three rounds of DeepGEMM's masked rows
# and a trace (final_check); then MOEKIT_B_EVICT_FIRST=0 vs 1 on the layer at T <= 4096 (two rounds).
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
final_check
for r in 1 2; do for e in 0 1; do moe_round e$e $r 1,8,1024,4096 MOEKIT_B_EVICT_FIRST=$e; done; done
echo "total $(( $(date +%s) - t0 )) s"
