#!/bin/bash
# Device call (v18): where GEMM1's prefill time goes. Compile-time variants of the chained (p64)
# schedule via MOEKIT_JIT_DEFINES, GEMM1 stage of `bench moe` at T = 4096 / 16384, 2 interleaved rounds:
#   CHAIN_PIPE      each chain of 64 promoted under the other chain's wgmmas
#   DIAG_NO_LOADS   stages loaded once, then only arrived on (no TMA traffic; wrong results)
#   DIAG_NO_PROMOTE no FP32 work but in the last K block (wrong results)
# First: the GEMM1 / layer tests with CHAIN_PIPE compiled in (it may be kept).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
MOEKIT_JIT_DEFINES=MOEKIT_CHAIN_PIPE=1 timeout 200 ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.*:MoeLayer.*' > $OUT/tests_chainpipe.log 2>&1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure" $OUT/tests_chainpipe.log | head -12
echo "tests took $(( $(date +%s) - t0 )) s"
V="-;MOEKIT_JIT_DEFINES=MOEKIT_CHAIN_PIPE=1;MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1"
V="$V;MOEKIT_JIT_DEFINES=MOEKIT_CHAIN_PIPE=1,MOEKIT_DIAG_NO_LOADS=1;MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_PROMOTE=1"
V="$V;MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_PROMOTE=1,MOEKIT_DIAG_NO_LOADS=1;MOEKIT_GEMM1_PROMOTE_K=128"
V="$V;MOEKIT_GEMM1_PROMOTE_K=128 MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1"
IFS=';' read -ra VS <<< "$V"
for round in 1 2; do
  for v in "${VS[@]}"; do
    if [ "$v" = "-" ]; then envs=(); else read -ra envs <<< "$v"; fi
    env "${envs[@]}" timeout 120 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --no-check --tokens 4096,16384 > $OUT/r${round}.txt 2>&1
    echo "r$round [$v] $(awk '$1 ~ /^deepseek/ {printf "T=%s %s | ", $2, $5}' $OUT/r${round}.txt) $(grep -h '^# stages' $OUT/r${round}.txt | sed 's/.*T=\([0-9]*\).*gemm1_swiglu \([0-9.]*\), gemm2_rows \([0-9.]*\).*/g1@\1 \2 g2 \3/' | tr '\n' ' ')"
  done
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
done
echo "total $(( $(date +%s) - t0 )) s"
