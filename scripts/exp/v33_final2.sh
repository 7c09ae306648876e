# v33 final check, part 2 (HEAD's build): bench gemm / grouped / the main job, three rounds of DeepGEMM's masked rows
# and a trace (final_check); then the v32 B-scale reads (MOEKIT_SB_AHEAD=0, MOEKIT_SB_PREFETCH=0) against HEAD's
# per-kernel defaults on the masked rows and the layer, two interleaved rounds.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
final_check
trace_masked "" masked:1:1024:4096:7168
for r in 1 2; do
  MOEKIT_JIT_DEFINES=MOEKIT_SB_AHEAD=0,MOEKIT_SB_PREFETCH=0 masked_round "r$r v32 reads"
  masked_round "r$r HEAD"
  moe_round v32reads $r 1,8,1024,4096 MOEKIT_JIT_DEFINES=MOEKIT_SB_AHEAD=0,MOEKIT_SB_PREFETCH=0
  moe_round head $r 1,8,1024,4096
done
echo "total $(( $(date +%s) - t0 )) s"
