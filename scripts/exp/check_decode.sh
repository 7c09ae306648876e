#!/bin/bash
# MoE tests, the deepseek-v3 bench and the per-CTA GEMM traces in one device call.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
B=./build/moekit
timeout 240 ./build/moekit_gpu_tests --gtest_filter=${FILTER:-'MoeGemm*:MoeLayer*:GroupedGemm*'} 2>&1 | grep -E "^\[  (FAILED|PASSED) |^\[==========\]|Failure" | head -20
timeout 300 $B bench moe --no-baseline --tokens ${BENCH_TOKENS:-1,8,64,256,1024,4096} 2>&1 | grep -E "^deepseek|^# stages|^# moekit"
TOKENS=${TRACE_TOKENS:-1 64} bash scripts/exp/trace_decode.sh
