# v31 device call 3: do B-multicast pairs of 128-row tiles (each CTA loads half of B, c2) speed up the K loop of
# 128 x 128 tiles at the masked rows' sizes? Dense GEMMs of the rows' shapes, forced configurations, plus traces.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
S=1024:7168:2048,1024:4096:7168,2048:7168:2048
for r in 1 2; do
for cfg in m128n128s5g8x132c1 m128n128s5g8x132c2 m256n128s3g8x132c1; do
  echo "== r$r $cfg"
  timeout 60 ./build/moekit bench gemm --no-baseline --reps 20 --shapes $S --config $cfg 2>&1 | grep -E "^ *[0-9]+ " | cut -c1-100
done
done
for cfg in m128n128s5g8x132c1 m128n128s5g8x132c2; do
  MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench gemm --no-baseline --reps 3 --shapes 1024:7168:2048 --config $cfg 2>&1 | grep -A3 "moekit trace" | head -4 | cut -c1-300
done
