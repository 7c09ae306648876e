# v31 device call 4: cuBLASLt's kernel on masked 1 x 1024 (4096, 7168) is nvjet 128x128, 6 stages, clusters of 1x2,
# 132 persistent CTAs (ncu), 48.5 us kernel-only against our 51.7. Do 6 stages / other rasters help our 128 x 128 tile?
export MOEKIT_CACHE_DIR=$PWD/.jitcache
for r in 1 2; do
for cfg in m256n128s3g4x132c1 m128n128s5g8x132c1 m128n128s6g8x132c1 m128n128s6g2x132c1 m128n128s6g1x132c1; do
  echo "r$r $cfg: $(MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline --reps 20 --case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:4:256:7168:2048 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
done
done
