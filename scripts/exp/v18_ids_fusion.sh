#!/bin/bash
# Device call (v18): the GPU suite; sort + quantize in one launch for callers' top-k ids (moe_sort_quantize):
# A/B of MOEKIT_FUSED_QUANT=0 against the default on the layer with ids (bench moe's moe_us column) and with
# logits (us), 3 interleaved rounds; memcheck / racecheck on the new test.
source scripts/exp/gpu_suite.sh
for round in 1 2 3; do
  for v in "MOEKIT_FUSED_QUANT=0" "MOEKIT_X=0"; do
    env $v timeout 120 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --no-check --tokens 1,2,8,64,256 > $OUT/ab.txt 2>&1
    echo "r$round [$v] (T us moe_us) $(awk '$1 ~ /^deepseek/ {printf "%s %s %s | ", $2, $5, $7}' $OUT/ab.txt)"
  done
done
grep -h "^# stages" $OUT/ab.txt | cut -c1-150
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='SortQuantizeFusedGpu.*' RACECHECK_FILTER='SortQuantizeFusedGpu.*' sanitize
echo "total $(( $(date +%s) - t0 )) s"
