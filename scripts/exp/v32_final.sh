# v32 final check, part 1 (HEAD's build: direct stores for short launches, B evict-first for the masked / dense / MoE
# decode GEMMs but not the plain contiguous one): the whole GPU suite, memcheck and racecheck (v32_call3.sh with
# wider filters). Part 2: v32_final2.sh.
MEMCHECK_FILTER='GemmFp8.DirectStore:GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts' \
  bash scripts/exp/v32_call3.sh
