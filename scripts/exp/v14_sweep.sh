#!/bin/bash
# Device call (v14): forced-config sweep of the dense GEMM over the M = 4096 shapes (bench gemm --config),
# to see which tile / stage / multicast / raster choices the heuristic should make now that the math
# warpgroups issue in turn. CONFIGS (space-separated) and GEMM_SHAPES override; GTEST_FILTER runs tests first.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
if [ -n "$GTEST_FILTER" ]; then
  timeout 200 ./build/moekit_gpu_tests --gtest_filter="$GTEST_FILTER" > $OUT/tests.log 2>&1
  echo "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/tests.log | tr '\n' ' ')"
fi
S4096=4096:2112:7168,4096:24576:1536,4096:32768:512,4096:7168:16384,4096:4096:7168,4096:7168:2048
CF=${CONFIGS:-"auto m128n128s5g8x132c1 m128n128s5g8x132c2 m128n128s6g8x132c1 m128n128s5g16x132c1 m128n128s5g4x132c1 m128n160s5g8x132c1 m128n160s5g8x132c2 m128n192s4g8x132c1 m128n192s4g8x132c2 m128n144s5g8x132c1 m128n112s6g8x132c1"}
for r in $(seq 1 ${ROUNDS:-1}); do
  for cfg in $CF; do
    if [ "$cfg" = auto ]; then extra=""; else extra="--config $cfg"; fi
    timeout 120 ./build/moekit bench gemm --shapes ${GEMM_SHAPES:-$S4096} --no-baseline $extra > $OUT/sweep_r${r}_$cfg.txt 2>&1
    echo "r$r $cfg: $(awk '$1 ~ /^[0-9]+$/ && NF > 6 {printf "%sx%sx%s %s %s | ", $1, $2, $3, $4, $5}' $OUT/sweep_r${r}_$cfg.txt) $(grep -m1 -i error $OUT/sweep_r${r}_$cfg.txt)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
