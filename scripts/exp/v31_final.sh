# v31 final check (stream-K removed: the masked kernel is back to 08e7c2b's data-parallel path, 5868a64's code):
# the whole GPU suite, memcheck on the masked GEMM's tests, racecheck on the masked graph test, bench gemm / grouped /
# the main job, three rounds of DeepGEMM's masked rows, one traced launch.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='GroupedGemmMasked.RandomCounts:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts:GroupedGemmWideTiles.ContiguousAndMasked' \
RACECHECK_FILTER='GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts' MEMCHECK_TIMEOUT=150 RACECHECK_TIMEOUT=120 session_final
