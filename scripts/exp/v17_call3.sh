#!/bin/bash
# Device call 3 (v17): GPU suite with the fused route + sort + quantize; T = 1 trace; A/B against the v16 build; accuracy.
GTEST_FILTER='RouteSort*:Routing*:MoeLayer*:MoeGemm1*:MoeSort*:*Permute*' source scripts/exp/gpu_suite.sh
echo "== trace"; MOEKIT_TRACE_GEMM=moe_gemm timeout 100 ./build/moekit bench moe --no-check --no-baseline --tokens 1 --reps 3 2>&1 | grep -A2 "moekit trace" | tail -6 | grep -v "^  at"
ROUNDS=3 BENCH_TOKENS=1,2,4,8,64,256 bash scripts/exp/ab_bin.sh
timeout 250 ./build/moekit bench moe --preset all --tokens 1,2,7 --no-baseline > $OUT/bench_moe_all.txt 2>&1
awk '$2 ~ /^[0-9]+$/ && NF > 8 {printf "%s T=%s rel_l2 %s us %s x%s | ", $1, $2, $4, $5, $12}' $OUT/bench_moe_all.txt; echo
echo "total $(( $(date +%s) - t0 )) s"
