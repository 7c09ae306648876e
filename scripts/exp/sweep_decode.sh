#!/bin/bash
# Decode-size experiments for the fused MoE GEMMs: GEMM1 stage sweep and ncu per-kernel figures.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
B=./build/moekit
run() { "$@" 2>/dev/null | grep "^# stages" | sed 's/^# stages deepseek-v3 //'; }
for s in 2 3 4; do for T in 1 64; do
  echo "== gemm1 s$s T=$T"; MOEKIT_MOE_GEMM1_CONFIG=m64n256s${s}g8x132 run $B bench moe --no-check --no-baseline --tokens $T --reps 10
done; done
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_read.sum.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed
for T in 1 64; do
  echo "== ncu T=$T"
  timeout 200 ncu --clock-control none -k regex:moe_gemm --launch-skip 6 --launch-count 2 --metrics $M $B bench moe --no-check --no-baseline --tokens $T --reps 3 2>&1 | grep -E "moekit_moe|gpu__time|dram__|sm__cyc|smsp__" | head -20
done
