# v33 device call 11 (needs a temporary knob, MOEKIT_SB_PREFETCH_64, not kept): the 64-row tiles' B-scale prefetch in mode 3
# (first tile only) against mode 2 (the final check's): decode-like rows, bench gemm at M = 64 / 128, the layer at small T;
# two interleaved rounds. Tests with 64-row tiles first.
GTEST_FILTER='GroupedGemmMasked.*:GemmFp8.RandomShapes:GemmFp8.EveryTileShape:MoeLayer.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for r in 1 2; do
  for m in 2 3; do
    export MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH_64=$m
    timeout 150 ./build/moekit bench grouped --no-baseline > $OUT/g.txt 2>&1
    echo "r$r mode$m grouped: $(awk '$1 == "decode" {printf "d%s/%s/%s %s %s%% | ", $2, $8, $9, $10, $13}' $OUT/g.txt)"
    timeout 120 ./build/moekit bench gemm --no-baseline --shapes 64:2112:7168,64:24576:1536,64:32768:512,64:7168:16384,64:4096:7168,64:7168:2048,128:2112:7168,128:24576:1536,128:32768:512,128:7168:16384,128:4096:7168,128:7168:2048 > $OUT/s.txt 2>&1
    echo "r$r mode$m gemm: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 && $1 < 4096 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/s.txt)"
    moe_round mode$m $r 1,8,64,256
    unset MOEKIT_JIT_DEFINES
  done
done
echo "total $(( $(date +%s) - t0 )) s"
