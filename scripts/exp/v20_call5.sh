# v20 device call 5: the GPU suite (compiling into .jitcache) with the reworked idle warpgroup,
# the tail-halves A/B on the masked cases, then bench grouped, bench gemm and the main job.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
tar czf $OUT/jitcache.tgz .jitcache
halves_ab 1 2
main_benches
echo "total $(( $(date +%s) - t0 )) s"
