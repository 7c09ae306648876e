#!/bin/bash
# Device call (v17 final, part 1): GPU suite; A/B of the v16 build (build_a) against this one at decode sizes;
# bench gemm, bench grouped, the main job. Part 2 (SANITIZE=1): memcheck and racecheck on the representative set.
if [ -n "$SANITIZE" ]; then
  export MOEKIT_CACHE_DIR=$PWD/.jitcache
  source scripts/exp/bench_lib.sh
  MEMCHECK_FILTER='GemmFp8.EveryTileShape:GroupedGemmContiguous.LayoutsAndShapes:GroupedGemmMasked.RandomCounts:MoeGemm1Swiglu.*:MoeGemm2Scatter.*:MoeLayer.GraphReplayWithNewLogitsMatchesEager:MoeLayer.DuplicatesMinusOneAndInvalidIds:MoeLayer.AllTokensOnOneExpertAndEmptyExperts:RouteSortFusedGpu.QuantizeInGraphMatchesEager'
  RACECHECK_FILTER='GemmFp8.EveryTileShape:MoeGemm1Swiglu.GatherMatchesPermuted:MoeGemm2Scatter.*:RouteSortFusedGpu.QuantizeInGraphMatchesEager'
  MEMCHECK_TIMEOUT=300 RACECHECK_TIMEOUT=250 sanitize
  (cd $OUT && tar czf san.tgz *.log && rm -f *.log)
  exit 0
fi
source scripts/exp/gpu_suite.sh
ROUNDS=2 BENCH_TOKENS=1,2,8,64,256 bash scripts/exp/ab_bin.sh | grep -v stages | cut -c1-110
source scripts/exp/bench_lib.sh
main_benches
echo "total $(( $(date +%s) - t0 )) s"
(cd $OUT && tar czf final.tgz *.txt *.log && rm -f *.txt *.log)
