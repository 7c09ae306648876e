#!/bin/bash
# Device call: full GPU suite, sanitizers (SANITIZE=1), rel_l2 of every preset (defaults), an A/B of
# environment knobs (default: MOEKIT_GEMM1_GATHER=0|1), the main job. Supersedes v12_check.sh (its A/B:
# AB_VARIANTS='-;MOEKIT_GEMM1_PROMOTE_K=128') and v11_check.sh (AB_VARIANTS='-;MOEKIT_FUSED_ROUTE=0').
# SKIP_TESTS=1 skips the suite; AB_VARIANTS / AB_TOKENS override the A/B; TRACE=1 adds per-CTA GEMM traces at T=1.
source scripts/exp/gpu_suite.sh
if [ -n "$SANITIZE" ]; then
  t1=$(date +%s)
  M='RouteSortFusedGpu.*:MoeGemm1Swiglu.GatherMatchesPermuted:MoeLayer.AllTokensOnOneExpertAndEmptyExperts:MoeLayer.DuplicatesMinusOneAndInvalidIds:MoeLayer.NanRowsStayLocal:MoeLayer.GraphReplayWithNewLogitsMatchesEager'
  timeout 300 compute-sanitizer --tool memcheck ./build/moekit_gpu_tests --gtest_filter="$M" > $OUT/memcheck.log 2>&1
  echo "memcheck: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | tail -2 | tr '\n' ' ')"
  timeout 200 compute-sanitizer --tool racecheck ./build/moekit_gpu_tests \
    --gtest_filter='RouteSortFusedGpu.NaNAndInfRows:MoeGemm1Swiglu.GatherMatchesPermuted:MoeLayer.AllTokensOnOneExpertAndEmptyExperts' > $OUT/racecheck.log 2>&1
  echo "racecheck: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/racecheck.log | tail -2 | tr '\n' ' ')"
  echo "sanitizers took $(( $(date +%s) - t1 )) s"
fi
timeout 200 ./build/moekit bench moe --preset all --tokens ${ACC_TOKENS:-1,2,7,64,1000,4096} --no-baseline > $OUT/acc.txt 2>&1
echo "rel_l2 (default chains): $(grep -E '^ *[a-z]' $OUT/acc.txt | grep -v '^#' | awk 'NR>1{printf "%s/%s %s  ", substr($1,1,6), $2, $4}')"
echo "max rel_l2: $(grep -E '^ *[a-z]' $OUT/acc.txt | grep -v '^#' | awk 'NR>1 && $4+0>m{m=$4+0; w=$1"/"$2} END{print m, w}')"
echo "accuracy took $(( $(date +%s) - t0 )) s"
VARIANTS=${AB_VARIANTS:-'MOEKIT_GEMM1_GATHER=0;MOEKIT_GEMM1_GATHER=1'} ROUNDS=${ROUNDS:-3} BENCH_TOKENS=${AB_TOKENS:-1,2,8,32,64} \
  scripts/exp/ab_env.sh > $OUT/ab.txt
awk '/^r[0-9]/{v=$2; for(i=3;i<=NF;i++) if ($i ~ /^deepseek/) {T=$(i+1); us=$(i+4)}; key=v" T="T; s[key]=s[key]" "us} END{for(k in s) print k": "s[k]}' $OUT/ab.txt | sort
if [ -n "$TRACE" ]; then
  for g in 0 1; do
    MOEKIT_GEMM1_GATHER=$g MOEKIT_TRACE_GEMM=moe_gemm MOEKIT_LOG_CONFIG=1 timeout 60 ./build/moekit bench moe \
      --preset deepseek-v3 --no-baseline --no-check --tokens 1 --reps 3 > $OUT/trace_g$g.txt 2>&1
    echo "trace gather=$g (last launches):"; grep -A2 "moekit trace" $OUT/trace_g$g.txt | tail -6 | cut -c1-260
    grep "moekit: moe" $OUT/trace_g$g.txt | sort | uniq -c | head -3
  done
fi
if [ -z "$SKIP_BENCH" ]; then
  timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
  grep -v "^# moekit" $OUT/bench_moe.txt | grep -E "^deepseek|^# stages|^preset" | cut -c1-150
fi
echo "total $(( $(date +%s) - t0 )) s"
if [ -n "$ALL_PRESETS" ]; then
  timeout 200 ./build/moekit bench moe --preset all --tokens 1,64,1024,16384 --no-baseline > $OUT/bench_moe_all.txt 2>&1
  grep -E "^ *[a-z]" $OUT/bench_moe_all.txt | grep -v "^# " | awk '{print $1, $2, $4, $5, $11}'
  echo "total $(( $(date +%s) - t0 )) s"
fi
