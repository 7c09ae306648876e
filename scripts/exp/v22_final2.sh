# v22 final check, part 2: memcheck and racecheck on the pairs sharing A (dense shapes, tail halves,
# grouped contiguous and masked) and the layer with its new GEMM2 tiles.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
source scripts/exp/bench_lib.sh
export MEMCHECK_FILTER='GroupedGemmWideTiles.PairsSharingA:GroupedGemmWideTiles.DynamicUnits:GemmFp8.TailHalves'
export RACECHECK_FILTER='GroupedGemmWideTiles.PairsSharingA:GroupedGemmWideTiles.DynamicUnits'
sanitize
