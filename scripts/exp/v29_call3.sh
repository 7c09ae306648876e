# v29 device call 3: GEMM2 (rows) with dynamic units (default) moved 26% more L2 bytes than static units in
# call 2 (ncu, T = 16384: 25.5 vs 20.2 GB, same DRAM bytes). Does that cost energy or time? deepseek-v3 layer
# with --energy, default against MOEKIT_MOE_DYNAMIC=g1 (GEMM2 static), three interleaved rounds.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for r in 1 2 3; do
  for v in "MOEKIT_X=0" "MOEKIT_MOE_DYNAMIC=g1"; do energy_round "$v" 4096,16384; done
done
echo "total $(( $(date +%s) - t0 )) s"
