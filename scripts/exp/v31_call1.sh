# (Needs 08e7c2b, which still has stream-K; kept as the record of v31 call 2.)
# v31 device call 1: a calibration of v31's stream-K
# finding (v30_call2: stream-K 1.3x slower on the masked (7168, 2048) rows, its K loop ~1.8x slower per tile):
# traced launches of 1 x 1024 (7168, 2048) with the data-parallel m256n128 and with stream-K on 128 x 128 tiles.
source scripts/exp/bench_lib.sh
export MOEKIT_CACHE_DIR=$PWD/.jitcache
for cfg in m256n128s3g4x132c1 m256n128s3g4x132c1sk m128n128s5g8x132c1 m128n128s5g8x132c1sk; do
  for c in masked:1:1024:7168:2048 masked:4:256:7168:2048; do
    echo "== $cfg $c"
    MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline --reps 20 --case $c 2>&1 | grep -E "^masked" | cut -c1-110
    MOEKIT_GROUPED_CONFIG=$cfg MOEKIT_TRACE_GEMM=fp8_gemm_masked timeout 60 ./build/moekit bench grouped --no-baseline --reps 3 --case $c 2>&1 | grep -A3 "moekit trace" | head -4 | cut -c1-260
  done
done
