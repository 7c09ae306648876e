#!/bin/bash
# A/B of MoE scheduling variants (env knobs such as MOEKIT_MOE_DYNAMIC=0), plus the
# GPU tests. VARIANTS: space-separated env assignments ("-" = defaults), each run ROUNDS times.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
B=./build/moekit
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
if [ "${TESTS:-1}" = 1 ]; then
  timeout 300 ./build/moekit_gpu_tests --gtest_filter=${FILTER:-'*'} > $OUT/gpu_tests.log 2>&1
  grep -E "^\[  (FAILED|PASSED) |^\[==========\]|Failure|GEMM1 (static|dynamic|split)|GEMM2 scatter" $OUT/gpu_tests.log | head -40
  timeout 60 ./build/moekit_cpu_tests > $OUT/cpu_tests.log 2>&1
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure" $OUT/cpu_tests.log | head
fi
TOK=${BENCH_TOKENS:-1,8,64,256,1024,4096,16384}
for round in $(seq 1 ${ROUNDS:-1}); do
  for v in ${VARIANTS:--}; do
    echo "== round $round variant $v"
    if [ "$v" = "-" ]; then envs=(); else envs=("$v"); fi
    env "${envs[@]}" timeout 300 $B bench moe --no-baseline --tokens $TOK ${EXTRA:-} 2>&1 | grep -E "^deepseek|^# stages|^ *preset|rror" | grep -v "^# moekit"
  done
done
