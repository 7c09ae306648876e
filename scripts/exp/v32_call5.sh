# v32 device call 5: masked 4 x 256 (7168, 2048), the one row still under DeepGEMM's table kernel-only (38.0 us against
# 36.9): forced configurations with and without direct stores (128-row tiles of 128/160/192 columns, 256 x 128), tail
# halves on / off, two rounds; the (7168, 2048) rows of 1 x 1024 and 2 x 512 alongside; traces of two picks.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
CASES="--case masked:4:256:7168:2048 --case masked:2:512:7168:2048 --case masked:1:1024:7168:2048"
for r in 1 2; do
  for cfg in m256n128s4g4x132c1r m256n128s3g4x132c1 m128n128s6g8x132c1r m128n160s6g8x132c1r m128n160s5g8x132c1 m128n192s5g8x132c1r m128n192s4g8x132c1 m128n192s5g2x132c1r m256n128s4g1x132c1r; do
    echo "r$r $cfg: $(MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline $CASES 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
  done
  echo "r$r m256n128s4r halves=0: $(MOEKIT_TAIL_HALVES=0 MOEKIT_GROUPED_CONFIG=m256n128s4g4x132c1r timeout 60 ./build/moekit bench grouped --no-baseline $CASES 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
done
source scripts/exp/bench_lib.sh
for cfg in m128n192s5g8x132c1r m128n160s6g8x132c1r; do trace_masked $cfg masked:4:256:7168:2048; done
echo "total $(( $(date +%s) - t0 )) s"
