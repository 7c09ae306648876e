# Sourced by the device-call scripts: JIT cache in the repository, the GPU's state, t0, and the GPU
# suite (unless SKIP_TESTS; GTEST_FILTER narrows it) with its summary lines.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
if [ -z "$SKIP_TESTS" ]; then
  timeout 330 ./build/moekit_gpu_tests ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} > $OUT/gpu_tests.log 2>&1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure" $OUT/gpu_tests.log | head -20
  echo "tests took $(( $(date +%s) - t0 )) s"
fi
