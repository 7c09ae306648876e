# v28 device call 10: does sharing A (halving GEMM2's A fetches) save energy? The layer's rows GEMM2 as
# static 256-row single CTAs against static 256-row pairs sharing A (MOEKIT_GROUPED_CONFIG ...c2), GEMM1
# as usual; bench moe --energy, deepseek-v3 T = 4096 and 16384, two rounds.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for r in 1 2; do
  for v in "MOEKIT_MOE_DYNAMIC=g1" "MOEKIT_MOE_DYNAMIC=g1 MOEKIT_GROUPED_CONFIG=m256n128s3g8x132c2"; do
    energy_round "$v" 4096,16384
  done
done
echo "total $(( $(date +%s) - t0 )) s"
