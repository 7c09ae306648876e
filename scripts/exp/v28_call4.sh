# v28 device call 4: the deferred GEMM1 epilogue in its final form (gate / up sums handed over, FP8 tile
# over the consumed up sums, four stages). GEMM1 tests + racecheck of the new test; ncu cycles at base
# clocks (T = 4096, 16384); then deepseek-v3 T = 4096, 8192, 16384 in three interleaved rounds: default,
# deferred, and the default epilogue with four stages.
# Needs scripts/exp/v28_deferred_epilogue.patch applied to 83c3eff (the deferred epilogue was removed after this call).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
timeout 300 ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.*:MoeLayer.PresetsMatchSpecReference' > $OUT/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/tests.txt | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
grep -E 'FAILED|Failure|differ' $OUT/tests.txt | head -20
timeout 200 compute-sanitizer --tool racecheck ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.DeferredEpilogueIsBitIdentical' > $OUT/racecheck.log 2>&1
echo "racecheck rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/racecheck.log | tail -3 | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
MET='--metrics smsp__inst_executed.sum,gpu__time_duration.sum'
for T in 4096 16384; do
  for v in MOEKIT_X=0 MOEKIT_GEMM1_DEFERRED=1; do
    env $v timeout 120 ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps 2 > /dev/null 2>&1
    env $v timeout 200 ncu --clock-control base --kernel-name regex:moe_gemm1 --launch-skip 1 --launch-count 1 $MET ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps 1 > $OUT/ncu.txt 2>&1
    echo "ncu T=$T [$v] $(grep -E 'inst_executed|duration' $OUT/ncu.txt | awk '{printf "%s=%s ", $1, $NF}')"
  done
done
run() {  # TAG ROUND ENV...
  local tag=$1 r=$2; shift 2
  env "$@" timeout 250 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,8192,16384 --no-baseline --no-check > $OUT/ab_${tag}_r$r.txt 2>&1
  echo "$tag r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/ab_${tag}_r$r.txt) g1: $(grep '# stages' $OUT/ab_${tag}_r$r.txt | sed 's/.*gemm1_swiglu \([0-9.]*\).*/\1/' | tr '\n' ' ')"
}
for r in 1 2 3; do
  run base $r MOEKIT_X=0
  run def $r MOEKIT_GEMM1_DEFERRED=1
  run s4 $r MOEKIT_MOE_GEMM1_CONFIG=m64n256s4g8x132c2
done
echo "took $(( $(date +%s) - t0 )) s"
