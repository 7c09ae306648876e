# v21 final check, part 2 (committed build): the main job, then memcheck / racecheck / synccheck over
# the 256-row tile tests (dense tail halves, contiguous / masked wide tiles).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
source scripts/exp/bench_lib.sh
timeout 250 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
show_moe $OUT/bench_moe.txt
MEMCHECK_FILTER='GemmFp8.TailHalves:GroupedGemmWideTiles.*' RACECHECK_FILTER='GemmFp8.TailHalves' \
  MEMCHECK_TIMEOUT=150 RACECHECK_TIMEOUT=100 sanitize
timeout 100 compute-sanitizer --tool synccheck ./build/moekit_gpu_tests --gtest_filter='GemmFp8.TailHalves' > $OUT/synccheck.log 2>&1
echo "synccheck rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/synccheck.log | tail -2 | tr '\n' ' ')"
echo "total $(( $(date +%s) - t0 )) s"
