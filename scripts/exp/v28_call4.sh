# v28 device call 4: the deferred GEMM1 epilogue in its final form (gate / up sums handed over, FP8 tile
# over the consumed up sums, four stages). GEMM1 tests + racecheck of the new test; ncu cycles at base
# clocks (T = 4096, 16384); then deepseek-v3 T = 4096, 8192, 16384 in three interleaved rounds: default,
# deferred, and the default epilogue with four stages.
# Needs scripts/exp/v28_deferred_epilogue.patch applied to 83c3eff (the deferred epilogue was removed after this call).
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer.PresetsMatchSpecReference' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
RACECHECK_TIMEOUT=200 racecheck_run 'MoeGemm1Swiglu.DeferredEpilogueIsBitIdentical'
MET='--metrics smsp__inst_executed.sum,gpu__time_duration.sum'
for T in 4096 16384; do
  for v in MOEKIT_X=0 MOEKIT_GEMM1_DEFERRED=1; do
    env $v timeout 120 ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps 2 > /dev/null 2>&1
    env $v timeout 200 ncu --clock-control base --kernel-name regex:moe_gemm1 --launch-skip 1 --launch-count 1 $MET ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps 1 > $OUT/ncu.txt 2>&1
    echo "ncu T=$T [$v] $(grep -E 'inst_executed|duration' $OUT/ncu.txt | awk '{printf "%s=%s ", $1, $NF}')"
  done
done
for r in 1 2 3; do
  moe_round base $r 4096,8192,16384 MOEKIT_X=0
  moe_round def $r 4096,8192,16384 MOEKIT_GEMM1_DEFERRED=1
  moe_round s4 $r 4096,8192,16384 MOEKIT_MOE_GEMM1_CONFIG=m64n256s4g8x132c2
done
echo "took $(( $(date +%s) - t0 )) s"
