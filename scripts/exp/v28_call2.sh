# v28 device call 2: the deferred GEMM1 epilogue (SwigluFp8DeferredEpilogue). GEMM1 tests (bit-identical
# h across the three epilogue forms), then deepseek-v3 T = 4096, 8192, 16384 in two interleaved rounds:
# default, h handed over (4 stages), sums handed over (3 stages), and the default epilogue with 4 and 3
# stages (what the stage count alone costs).
# Ran on an intermediate build of the deferred epilogue (knob MOEKIT_GEMM1_DEFERRED=h|sums) that is not kept;
# scripts/exp/v28_deferred_epilogue.patch (applies to 83c3eff) holds the final form measured in call 4.
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer.PresetsMatchSpecReference' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for r in 1 2; do
  moe_round base $r 4096,8192,16384 MOEKIT_X=0
  moe_round h $r 4096,8192,16384 MOEKIT_GEMM1_DEFERRED=h
  moe_round sums $r 4096,8192,16384 MOEKIT_GEMM1_DEFERRED=sums
  moe_round s4 $r 4096,8192,16384 MOEKIT_MOE_GEMM1_CONFIG=m64n256s4g8x132c2
  moe_round s3 $r 4096,8192,16384 MOEKIT_MOE_GEMM1_CONFIG=m64n256s3g8x132c2
done
echo "took $(( $(date +%s) - t0 )) s"
