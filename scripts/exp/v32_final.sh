# v32 final check, part 1 (HEAD's build: direct stores for short launches, B evict-first for the masked / dense / MoE
# decode GEMMs but not the plain contiguous one): the whole GPU suite, memcheck and racecheck. Part 2: v32_final2.sh.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='GemmFp8.DirectStore:GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts:MoeLayer.PresetsMatchSpecReference'
RACECHECK_FILTER='GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts'
MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 sanitize
echo "total $(( $(date +%s) - t0 )) s"
