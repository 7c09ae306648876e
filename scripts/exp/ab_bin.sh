#!/bin/bash
# Same-machine A/B of two builds on `bench moe` (deepseek-v3 unless PRESET): BINS='./build_a/moekit ./build/moekit'
# (default), ROUNDS interleaved rounds, BENCH_TOKENS. Prints one line per (round, binary, T).
export MOEKIT_CACHE_DIR=${MOEKIT_CACHE_DIR:-$PWD/.jitcache}
TOK=${BENCH_TOKENS:-1,8,64}
for round in $(seq 1 ${ROUNDS:-2}); do
  for b in ${BINS:-./build_a/moekit ./build/moekit}; do
    timeout 300 $b bench moe --preset ${PRESET:-deepseek-v3} --no-baseline --no-check --tokens $TOK ${EXTRA:-} 2>&1 |
      grep -E "^ *${PRESET:-deepseek}|^# stages" | sed "s|^|r$round [$b] |" | cut -c1-160
  done
done
