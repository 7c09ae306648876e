#!/bin/bash
# Device call (v15): compute-sanitizer memcheck and racecheck on a representative set (dense GEMM shapes,
# grouped GEMMs, the MoE GEMMs and layer), on build/.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
M='GemmFp8.EveryTileShape:GroupedGemmContiguous.LayoutsAndShapes:GroupedGemmMasked.RandomCounts:GroupedGemmMasked.AllZeroCountsWriteNothing:MoeGemm1Swiglu.*:MoeGemm2Scatter.*:MoeLayer.GraphReplayWithNewLogitsMatchesEager:MoeLayer.DuplicatesMinusOneAndInvalidIds:MoeLayer.AllTokensOnOneExpertAndEmptyExperts'
timeout 280 compute-sanitizer --tool memcheck ./build/moekit_gpu_tests --gtest_filter="$M" > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | tail -3 | tr '\n' ' ')"
timeout 250 compute-sanitizer --tool racecheck ./build/moekit_gpu_tests --gtest_filter='GemmFp8.EveryTileShape:MoeGemm1Swiglu.GatherMatchesPermuted:MoeGemm2Scatter.*' > $OUT/racecheck.log 2>&1
echo "racecheck rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/racecheck.log | tail -3 | tr '\n' ' ')"
echo "total $(( $(date +%s) - t0 )) s"
[ -z "$NO_TAR" ] && (cd $OUT && tar czf san.tgz *.log && rm -f *.log)
