#!/bin/bash
# Device call (v15 final): GPU suite, bench gemm and bench grouped (with cuBLASLt), a forced-config sweep
# of the shapes whose pick the v15 heuristic changed, the main job (bench moe deepseek-v3), and every
# preset at a few T on the previous binary (build_prev) and this one. SKIP_TESTS=1 skips the suite.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
main_benches
GEMM_SHAPES=4096:2112:7168,4096:2880:7168,2048:2112:7168,1024:4608:7168,1000:2880:2880,4096:2880:2880,1024:7168:2048 \
  CONFIGS="auto m128n128s5g8x132c1 m128n192s4g8x120c1 m128n112s6g8x132c1" bash scripts/exp/v14_sweep.sh | cut -c1-420
for r in 1 2; do
  for bin in build_prev/moekit build/moekit; do
    timeout 150 ./$bin bench moe --preset all --tokens 1,64,1024,4096 --no-check --no-baseline > $OUT/all_r${r}_${bin%%/*}.txt 2>&1
    echo "r$r $bin: $(awk '$2 ~ /^[0-9]+$/ && $5 ~ /^[0-9.]+$/ {printf "%s/%s %s | ", substr($1,1,10), $2, $5}' $OUT/all_r${r}_${bin%%/*}.txt)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
(cd $OUT && tar czf check.tgz *.txt *.log && rm -f *.txt *.log)
