#!/bin/bash
# Device call (v14 final): GPU suite, bench gemm and bench grouped (with cuBLASLt), the main job (bench moe
# deepseek-v3), then an A/B of the math warpgroups' issue order on the MoE layer at prefill (MOEKIT_WG_ORDER
# via MOEKIT_JIT_DEFINES; GEMM1 never orders, GEMM2's contiguous rows GEMM does). SKIP_TESTS=1 skips the suite.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
main_benches
for r in 1 2; do
  for v in MOEKIT_WG_ORDER=0 -; do
    if [ "$v" = "-" ]; then d=""; else d="$v"; fi
    MOEKIT_JIT_DEFINES="$d" timeout 200 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --no-check \
      --tokens 4096,16384 > $OUT/ab_r${r}_${v}.txt 2>&1
    echo "r$r [$v] $(awk '$1 ~ /^deepseek/ {printf "T=%s %s | ", $2, $5}' $OUT/ab_r${r}_${v}.txt) $(grep -h '^# stages.*16384' $OUT/ab_r${r}_${v}.txt | cut -c1-160)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
(cd $OUT && tar czf check.tgz *.txt *.log && rm -f *.txt *.log)
