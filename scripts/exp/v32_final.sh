# v32 final check (HEAD's build: direct stores for short launches, B evict-first for the masked / dense / MoE decode
# GEMMs but not the plain contiguous one): the whole GPU suite, memcheck and racecheck, bench gemm / grouped / the
# main job, three rounds of DeepGEMM's masked rows and a trace; then MOEKIT_B_EVICT_FIRST=0 vs 1 on the layer at
# T <= 4096 (two rounds).
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='GemmFp8.DirectStore:GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts:MoeLayer.PresetsMatchSpecReference'
RACECHECK_FILTER='GroupedGemmDirectStore.NarrowTiles:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts'
MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 sanitize
final_check
for r in 1 2; do for e in 0 1; do moe_round e$e $r 1,8,1024,4096 MOEKIT_B_EVICT_FIRST=$e; done; done
echo "total $(( $(date +%s) - t0 )) s"
