#!/bin/bash
# Same-machine A/B of environment knobs on `bench moe` (deepseek-v3 unless PRESET), e.g.
#   VARIANTS='-;MOEKIT_PDL_B_EARLY=0;MOEKIT_DIAG_SKIP=finalize' ROUNDS=3 BENCH_TOKENS=1,8 scripts/exp/ab_env.sh
# VARIANTS: ';'-separated variants, each a space-separated list of env assignments ("-" = defaults).
# Rounds interleave the variants so drift hits them alike. Prints one line per (round, variant, T).
# BIN: the moekit binary (default ./build/moekit).
export MOEKIT_CACHE_DIR=${MOEKIT_CACHE_DIR:-$PWD/.jitcache}
B=${BIN:-./build/moekit}
TOK=${BENCH_TOKENS:-1,8,64}
IFS=';' read -ra VS <<< "${VARIANTS:--}"
for round in $(seq 1 ${ROUNDS:-3}); do
  for v in "${VS[@]}"; do
    if [ "$v" = "-" ]; then envs=(); else read -ra envs <<< "$v"; fi
    env "${envs[@]}" timeout 300 $B bench moe --preset ${PRESET:-deepseek-v3} --no-baseline --no-check --tokens $TOK ${EXTRA:-} 2>&1 |
      grep -E "^ *${PRESET:-deepseek}" | sed "s|^|r$round [$v] |"
  done
done
