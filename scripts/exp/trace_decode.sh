#!/bin/bash
# Decode-size diagnostics: per-CTA timestamps of the fused GEMMs (MOEKIT_TRACE_GEMM).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
B=./build/moekit
for T in ${TOKENS:-1 64}; do
  echo "== trace T=$T"
  MOEKIT_TRACE_GEMM=moe_gemm timeout 100 $B bench moe --no-check --no-baseline --tokens $T --reps 3 2>&1 | grep -A2 "moekit trace" | tail -6
done
