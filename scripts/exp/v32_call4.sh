# v32 device call 4 (final build, part 2): GemmFp8.* and the direct-store tests with memcheck, then bench gemm / grouped / the main job, three rounds of DeepGEMM's masked
# rows and a trace (final_check), then the v31 picks (MOEKIT_DIRECT_STORE=0) against the default on the masked rows
# and on short dense shapes, two interleaved rounds.
# First the dense GEMM tests (guard rows past D now) and the direct-store tests after call 3's memcheck finding
# (a B-multicast pair's ghost tile past M stored rows past D: fixed), memcheck again on the same set.
GTEST_FILTER='GemmFp8.*:GroupedGemmDirectStore.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='GemmFp8.DirectStore:GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts'
timeout 200 compute-sanitizer --tool memcheck ./build/moekit_gpu_tests --gtest_filter="$MEMCHECK_FILTER" > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | tail -3 | tr '\n' ' ')"
final_check
SHORT=1024:4096:7168,1024:7168:2048,2048:2112:7168,512:7168:2048,1024:24576:1536,1024:7168:1024
for r in 1 2; do
  for d in 0 1; do
    MOEKIT_DIRECT_STORE=$d masked_round "r$r direct=$d masked"
    MOEKIT_DIRECT_STORE=$d MOEKIT_LOG_CONFIG=1 timeout 120 ./build/moekit bench gemm --no-baseline --shapes $SHORT > $OUT/s.txt 2>&1
    echo "r$r direct=$d dense: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s %s %s | ", $1, $2, $3, $4, $5, $6}' $OUT/s.txt)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
