# v20 device call 3: the whole GPU suite with the tail halves (compiles every kernel it uses into
# .jitcache, which comes back as a tarball).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
timeout 560 ./build/moekit_gpu_tests > $OUT/gpu_tests.log 2>&1
echo "rc=$?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|TailHalves" $OUT/gpu_tests.log | head -30
echo "tests took $(( $(date +%s) - t0 )) s"
tar czf $OUT/jitcache.tgz .jitcache
