# v31 device call 8: is the 128 x 128 tile's K loop stage-bound? m128n128 with 3, 4 and 5 stages on the masked rows
# (a 6th stage does not fit beside the 32 KB staging tile; cuBLASLt's 128x128 kernel runs 6).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
for r in 1 2; do
for cfg in m128n128s3g8x132c1 m128n128s4g8x132c1 m128n128s5g8x132c1; do
  echo "r$r $cfg: $(MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline --reps 20 --case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
done
done
