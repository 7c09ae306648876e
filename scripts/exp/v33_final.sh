# v33 final check, part 1 (HEAD's build): the whole GPU suite, memcheck (direct-store, masked, MoE presets) and
# racecheck. Part 2: v33_final2.sh.
MEMCHECK_FILTER='GemmFp8.DirectStore:GemmFp8.SplitK:GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts' \
  bash scripts/exp/v32_call3.sh
