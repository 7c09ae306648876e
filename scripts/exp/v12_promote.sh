#!/bin/bash
# Device call: GEMM1 promotion every 128 vs 64 of K (MOEKIT_GEMM1_PROMOTE_K): h-code flips of the
# GEMM1 unit test, end-to-end rel_l2 of every preset, and interleaved timing of deepseek-v3.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
for P in 128 64; do
  MOEKIT_GEMM1_PROMOTE_K=$P timeout 120 ./build/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.*' > $OUT/g1_$P.log 2>&1
  echo "== P=$P $(grep -E 'PASSED|FAILED' $OUT/g1_$P.log | head -2 | tr '\n' ' ')"
  grep 'GEMM1 static' $OUT/g1_$P.log | sed 's/codes, /codes /' | awk '{print $3,$4,$6,$9,$11,$NF}'
done
echo "unit tests took $(( $(date +%s) - t0 )) s"
for P in 128 64; do
  MOEKIT_GEMM1_PROMOTE_K=$P timeout 280 ./build/moekit bench moe --preset all --tokens ${ACC_TOKENS:-1,2,7,64,1000,4096} --no-baseline > $OUT/acc_$P.txt 2>&1
  echo "== rel_l2 P=$P: $(grep -E '^ *[a-z]' $OUT/acc_$P.txt | grep -v '^#' | awk 'NR>1{printf "%s/%s %s  ", substr($1,1,6), $2, $4}')"
  echo "took $(( $(date +%s) - t0 )) s"
done
VARIANTS='MOEKIT_GEMM1_PROMOTE_K=128;MOEKIT_GEMM1_PROMOTE_K=64' ROUNDS=${ROUNDS:-2} BENCH_TOKENS=${AB_TOKENS:-1,8,64,256,1024,4096,16384} \
  scripts/exp/ab_env.sh > $OUT/ab.txt
awk '/^r[0-9]/{v=$2; for(i=3;i<=NF;i++) if ($i ~ /^deepseek/) {T=$(i+1); us=$(i+4)}; key=v" T="T; s[key]=s[key]" "us} END{for(k in s) print k": "s[k]}' $OUT/ab.txt | sort -t= -k3 -n
echo "total $(( $(date +%s) - t0 )) s"
