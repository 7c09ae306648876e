# v28 device call 2: the deferred GEMM1 epilogue (SwigluFp8DeferredEpilogue). GEMM1 tests (bit-identical
# h across the three epilogue forms), then deepseek-v3 T = 4096, 8192, 16384 in two interleaved rounds:
# default, h handed over (4 stages), sums handed over (3 stages), and the default epilogue with 4 and 3
# stages (what the stage count alone costs).
# Ran on an intermediate build of the deferred epilogue (knob MOEKIT_GEMM1_DEFERRED=h|sums) that is not kept;
# scripts/exp/v28_deferred_epilogue.patch (applies to 83c3eff) holds the final form measured in call 4.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
t0=$(date +%s)
timeout 300 ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.*:MoeLayer.PresetsMatchSpecReference' > $OUT/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/tests.txt | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
grep -E 'FAILED|Failure|differ' $OUT/tests.txt | head -20
run() {  # TAG ROUND ENV...
  local tag=$1 r=$2; shift 2
  env "$@" timeout 250 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,8192,16384 --no-baseline --no-check > $OUT/ab_${tag}_r$r.txt 2>&1
  echo "$tag r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/ab_${tag}_r$r.txt) g1: $(grep '# stages' $OUT/ab_${tag}_r$r.txt | sed 's/.*gemm1_swiglu \([0-9.]*\).*/\1/' | tr '\n' ' ')"
}
for r in 1 2; do
  run base $r MOEKIT_X=0
  run h $r MOEKIT_GEMM1_DEFERRED=h
  run sums $r MOEKIT_GEMM1_DEFERRED=sums
  run s4 $r MOEKIT_MOE_GEMM1_CONFIG=m64n256s4g8x132c2
  run s3 $r MOEKIT_MOE_GEMM1_CONFIG=m64n256s3g8x132c2
done
echo "took $(( $(date +%s) - t0 )) s"
