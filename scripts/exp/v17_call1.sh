#!/bin/bash
# Device call 1 (v17): GEMM1 / layer tests on the new epilogue, T = 1 traces, A/B of the previous build against this one.
GTEST_FILTER='MoeGemm1*:MoeLayer*:MoeGemm2*:*Swiglu*' source scripts/exp/gpu_suite.sh
for b in ./build_a/moekit ./build/moekit; do
  echo "== trace $b"
  MOEKIT_TRACE_GEMM=moe_gemm timeout 100 $b bench moe --no-check --no-baseline --tokens 1 --reps 3 2>&1 | grep -A2 "moekit trace" | tail -6
done
ROUNDS=2 BENCH_TOKENS=1,2,8,64,256,1024,4096,16384 bash scripts/exp/ab_bin.sh
timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 1,2,7,64,1000,4096 --no-baseline > $OUT/bench_moe_check.txt 2>&1
awk '$1 ~ /^deepseek/ {printf "T=%s rel_l2 %s us %s | ", $2, $4, $5}' $OUT/bench_moe_check.txt; echo
echo "total $(( $(date +%s) - t0 )) s"
