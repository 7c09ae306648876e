#!/bin/bash
# Device call (v15): GPU suite on build/, racecheck of the GEMM1 tests, then an A/B over binaries and
# compile-time switches, rounds interleaved: build_prev/moekit (the previous commit), build/moekit with
# MOEKIT_UNIFORM_WG=0 (new chained GEMM1 schedule only) and build/moekit (also the warp-uniform
# warpgroup index). bench gemm (M = 4096 shapes) and bench moe (deepseek-v3). SKIP_TESTS=1 skips the
# suite, ROUNDS (2), MOE_TOKENS override. The pipelined chained schedule and the MOEKIT_UNIFORM_WG switch
# existed only in the build of docs/runs/v15-ab-chained-uniform-h100.txt (perf-notes v15).
source scripts/exp/gpu_suite.sh
if [ -z "$SKIP_TESTS" ]; then
  timeout 120 compute-sanitizer --tool racecheck ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.GatherMatchesPermuted' > $OUT/racecheck.log 2>&1
  echo "racecheck: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.log)"
fi
source scripts/exp/bench_lib.sh
VS=("prev|build_prev/moekit|" "wg0|build/moekit|MOEKIT_UNIFORM_WG=0" "new|build/moekit|")
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in "${VS[@]}"; do
    IFS='|' read -r tag bin defs <<< "$v"
    MOEKIT_JIT_DEFINES="$defs" timeout 200 ./$bin bench gemm --shapes $S4096 > $OUT/gemm_r${r}_$tag.txt 2>&1
    MOEKIT_JIT_DEFINES="$defs" timeout 250 ./$bin bench moe --preset deepseek-v3 --no-baseline --no-check \
      --tokens ${MOE_TOKENS:-1,64,1024,4096,16384} > $OUT/moe_r${r}_$tag.txt 2>&1
    echo "round $r [$tag] done at $(( $(date +%s) - t0 )) s"
  done
done
round_summaries
echo "total $(( $(date +%s) - t0 )) s"
(cd $OUT && tar czf ab.tgz *.txt *.log && rm -f *.txt *.log)
