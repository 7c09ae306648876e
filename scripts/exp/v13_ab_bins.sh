#!/bin/bash
# Device call (v13): gather tests + racecheck, then an A/B over two binaries (build_prev/moekit, the
# previous build, carried alongside build/) x MOEKIT_GEMM1_GATHER=0|1, rounds interleaved.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
timeout 200 ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.*:MoeLayer.GatheredAndPermutedActivationsAreBitIdentical:MoeLayer.GraphReplayWithNewLogitsMatchesEager' > $OUT/tests.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/tests.log | tr '\n' ' ')"
timeout 120 compute-sanitizer --tool racecheck ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.GatherMatchesPermuted' > $OUT/racecheck.log 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck.log)"
for r in $(seq 1 ${ROUNDS:-2}); do
  for bin in ${BINS:-build_prev/moekit build/moekit}; do
    BIN=./$bin ROUNDS=1 VARIANTS='MOEKIT_GEMM1_GATHER=0;MOEKIT_GEMM1_GATHER=1' BENCH_TOKENS=${AB_TOKENS:-1,2,64,1024,4096,16384} \
      scripts/exp/ab_env.sh | sed "s|^r1 |r$r $bin |"
  done
done > $OUT/ab.txt
awk '{for(i=3;i<=NF;i++) if ($i ~ /^deepseek/) {T=$(i+1); us=$(i+4)}; key=$2" "$3" T="T; s[key]=s[key]" "us} END{for(k in s) print k": "s[k]}' $OUT/ab.txt | sort -t= -k3 -n -s
echo "total $(( $(date +%s) - t0 )) s"
