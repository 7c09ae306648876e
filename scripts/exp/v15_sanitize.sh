#!/bin/bash
# Device call (v15): compute-sanitizer memcheck and racecheck on a representative set (dense GEMM tile
# shapes, grouped GEMMs, the MoE GEMMs and layer), on build/. NO_TAR=1 leaves the logs untarred.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='GemmFp8.EveryTileShape:GroupedGemmContiguous.LayoutsAndShapes:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.AllZeroCountsWriteNothing:MoeGemm1Swiglu.*:MoeGemm2Scatter.*:MoeLayer.GraphReplayWithNewLogitsMatchesEager:MoeLayer.DuplicatesMinusOneAndInvalidIds:MoeLayer.AllTokensOnOneExpertAndEmptyExperts'
RACECHECK_FILTER='GemmFp8.EveryTileShape:MoeGemm1Swiglu.GatherMatchesPermuted:MoeGemm2Scatter.*'
sanitize
[ -z "$NO_TAR" ] && (cd $OUT && tar czf san.tgz *.log && rm -f *.log)
