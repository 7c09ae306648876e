#!/bin/bash
# Device call (v13): GEMM1 gather variant — its tests, an A/B against the permuted copy
# (MOEKIT_GEMM1_GATHER=0|1), and SM clock / power sampled during a long prefill bench.
# GTEST_FILTER overrides the tests; SKIP_AB=1 / SKIP_CLOCKS=1 skip those parts.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
t0=$(date +%s)
F=${GTEST_FILTER:-'MoeGemm1Swiglu.*:MoeLayer.GatheredAndPermutedActivationsAreBitIdentical:MoeLayer.PresetsMatchSpecReference:MoeLayer.GraphReplayWithNewLogitsMatchesEager:MoeLayer.DuplicatesMinusOneAndInvalidIds'}
timeout 300 ./build/moekit_gpu_tests --gtest_filter="$F" > $OUT/gpu_tests.log 2>&1
echo "tests rc=$?"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|differ|wrote" $OUT/gpu_tests.log | head -20
echo "tests took $(( $(date +%s) - t0 )) s"
if [ -z "$SKIP_AB" ]; then
  VARIANTS=${AB_VARIANTS:-'MOEKIT_GEMM1_GATHER=0;MOEKIT_GEMM1_GATHER=1'} ROUNDS=${ROUNDS:-2} \
    BENCH_TOKENS=${AB_TOKENS:-1,2,8,64,256,1024,4096,16384} scripts/exp/ab_env.sh > $OUT/ab.txt
  awk '/^r[0-9]/{v=$2; for(i=3;i<=NF;i++) if ($i ~ /^deepseek/) {T=$(i+1); us=$(i+4)}; key=v" T="T; s[key]=s[key]" "us} END{for(k in s) print k": "s[k]}' $OUT/ab.txt | sort -t= -k3 -n
  for g in 0 1; do
    MOEKIT_GEMM1_GATHER=$g timeout 120 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --tokens 1,16384 > $OUT/stages_g$g.txt 2>&1
    echo "gather=$g:"; grep -E "^deepseek|stages" $OUT/stages_g$g.txt | cut -c1-220
  done
  echo "A/B took $(( $(date +%s) - t0 )) s"
fi
if [ -z "$SKIP_CLOCKS" ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 50 > $OUT/smi.csv &
  SMI=$!
  sleep 1
  timeout 120 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --no-check --tokens 16384 --reps 30 > $OUT/clock_bench.txt 2>&1
  sleep 1
  kill $SMI
  grep -E "^deepseek" $OUT/clock_bench.txt | cut -c1-150
  awk -F', ' '{c=$2+0; p=$3+0; if (p>250) {n++; cs+=c; ps+=p; if(c<cmin||cmin==0)cmin=c; if(c>cmax)cmax=c}; r[$5]++} END{printf "busy samples %d: SM clock mean %.0f MHz (min %d, max %d), power mean %.0f W\n", n, cs/n, cmin, cmax, ps/n; for (k in r) print "  reasons " k ": " r[k]}' $OUT/smi.csv
fi
echo "total $(( $(date +%s) - t0 )) s"
