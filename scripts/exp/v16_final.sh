#!/bin/bash
# Device call (v16 final): GPU suite, the wgmma probe, bench grouped (default cases and a --case run), main job.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
./build/moekit_wgmma_probe
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
grep -E "^(contiguous|masked|decode)|geomean" $OUT/bench_grouped.txt | cut -c1-150
timeout 100 ./build/moekit bench grouped --no-baseline --reps 10 --case contiguous:256:512:4096:7168 --case masked:8:64:7168:2048 2>&1 | grep -E "^(contiguous|masked)" | cut -c1-110
timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
moe_summary $OUT/bench_moe.txt
echo "total $(( $(date +%s) - t0 )) s"
