# v20 device call 6: sanitizers over the tests that run half tiles and idle warpgroups.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='GemmFp8.TailHalves:GroupedGemmMasked.RandomCounts:GroupedGemmContiguous.LayoutsAndShapes:MoeGemm2Scatter.*'
RACECHECK_FILTER='GemmFp8.TailHalves:GroupedGemmMasked.RandomCounts'
sanitize
timeout 200 compute-sanitizer --tool synccheck ./build/moekit_gpu_tests --gtest_filter='GemmFp8.TailHalves:GroupedGemmMasked.RandomCounts' > $OUT/synccheck.log 2>&1
echo "synccheck rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/synccheck.log | tail -3 | tr '\n' ' ')"
