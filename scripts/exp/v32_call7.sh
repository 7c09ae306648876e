# v32 device call 7: masked 4 x 256 (7168, 2048) under the tiles DeepGEMM's own heuristic would pick (128 x 112: 512
# tiles = 3.9 waves, the fullest last wave; B tiles shared by the two M blocks), TMA store and direct, against the
# default m256n128s4r; two rounds.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
CASES="--case masked:4:256:7168:2048 --case masked:2:512:7168:2048"
for r in 1 2; do
  for cfg in m256n128s4g4x132c1r m128n112s6g8x132c1 m128n112s7g8x132c1r m128n120s6g8x132c1 m128n120s7g8x132c1r m128n96s7g8x132c1r m128n128s6g8x132c1r; do
    echo "r$r $cfg: $(MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline $CASES 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
