# v28 device call 8: energy per layer (bench moe --energy, NVML) for GEMM1 variants and with a GEMM left
# out, deepseek-v3 T = 4096 and 16384: default; MOEKIT_DIAG_NO_EPILOGUE / NO_PROMOTE / NO_LOADS (results
# wrong); chains of 128; single CTAs instead of the B-multicast pairs; GEMM1 or GEMM2 not launched.
# (Restructured after the run to use bench_lib.sh's energy_round; the same commands.)
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for v in "MOEKIT_X=0" "MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_EPILOGUE=1" "MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_PROMOTE=1" \
         "MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1" "MOEKIT_GEMM1_PROMOTE_K=128" "MOEKIT_MOE_GEMM1_CONFIG=m64n256s5g8x132c1" \
         "MOEKIT_DIAG_SKIP=gemm1_swiglu" "MOEKIT_DIAG_SKIP=gemm2_rows"; do
  energy_round $v 4096,16384
done
echo "total $(( $(date +%s) - t0 )) s"
