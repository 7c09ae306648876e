#!/bin/bash
# Device call (v15, after the tile-pipe fix): racecheck and memcheck on the representative set, the GPU
# suite, bench gemm, bench grouped and the main job.
source scripts/exp/gpu_suite.sh
NO_TAR=1 bash scripts/exp/v15_sanitize.sh
timeout 200 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
grep -E "^ *[0-9]+ |geomean" $OUT/bench_gemm.txt | cut -c1-150
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
grep -E "^(contiguous|masked|decode)|geomean" $OUT/bench_grouped.txt | cut -c1-150
timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
grep -v "^# moekit" $OUT/bench_moe.txt | grep -E "^deepseek|^# stages|^preset" | cut -c1-150
echo "total $(( $(date +%s) - t0 )) s"
(cd $OUT && tar czf final.tgz *.txt *.log && rm -f *.txt *.log)
