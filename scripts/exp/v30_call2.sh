# (v31: stream-K was measured slower and removed in the commit after 08e7c2b; this script needs 08e7c2b.)
# v30 device call 2 (written in a session without a device; not yet run): stream-K for the masked
# grouped GEMM (GemmConfig::stream_k, a workspace). First its correctness (new GroupedGemmStreamK.*
# tests, the other grouped tests as a regression, memcheck and racecheck of the stream-K tests), then
# DeepGEMM's masked rows with and without stream-K (MOEKIT_STREAM_K=0), interleaved, with one traced
# launch each of 2 x 512 (7168, 2048).
GTEST_FILTER='GroupedGemm*:Jit.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
if grep -q "FAILED" $OUT/gpu_tests.log; then grep -E "Failure|FAILED|Expected|Which|actual" $OUT/gpu_tests.log | head -40; fi
MEMCHECK_FILTER='GroupedGemmStreamK.DeepGemmMaskedRows:GroupedGemmStreamK.CudaGraph*' RACECHECK_FILTER='GroupedGemmStreamK.ForcedConfigsAndLayouts' sanitize
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2 3; do
  MOEKIT_STREAM_K=0 masked_round "dp r$r"
  masked_round "sk r$r"
done
grep -E "^masked" $OUT/m.txt | cut -c1-220
for v in 0 1; do
  MOEKIT_STREAM_K=$v MOEKIT_TRACE_GEMM=fp8_gemm_masked timeout 60 ./build/moekit bench grouped --no-baseline --reps 3 --case masked:2:512:7168:2048 2>&1 | grep -A3 "moekit trace" | head -8
done
echo "total $(( $(date +%s) - t0 )) s"
