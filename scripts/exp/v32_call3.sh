# v32 device call 3 (final build, part 1): the whole GPU suite, memcheck on the direct-store and masked tests,
# racecheck on a direct-store grouped test (MEMCHECK_FILTER / RACECHECK_FILTER override them: v32_final.sh).
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER=${MEMCHECK_FILTER:-'GemmFp8.DirectStore:GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts'}
RACECHECK_FILTER=${RACECHECK_FILTER:-'GroupedGemmDirectStore.NarrowTiles'}
MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 sanitize
echo "total $(( $(date +%s) - t0 )) s"
