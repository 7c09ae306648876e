# v25 final check (committed build: the permute stores each token's scales once and gathers them by row
# from 2^19 per-slot stores on): the whole GPU suite, sanitizers on the new kernel, bench gemm, bench
# grouped (with cuBLASLt and cool-downs), the main job, three rounds of DeepGEMM's masked rows, one trace.
# (Since v28 through bench_lib.sh's session_final; the commands run are the same.)
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='PermuteQuantizeByToken.*:MoeLayer.PresetsMatchSpecReference' \
RACECHECK_FILTER='PermuteQuantizeByToken.MatchesTwoKernelPath' MEMCHECK_TIMEOUT=200 RACECHECK_TIMEOUT=150 session_final
