# v24 device call 1: does 2-CTA multicast make short 128-row-tile launches faster? Dense shapes shaped
# like the masked rows (1 x 1024, 2 x 512, 4 x 256 experts' rows), forced configurations, two rounds,
# event-timed us and kernel-only us; then one trace each of m128n128 c1 / c2 at 512x7168x2048.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
SH=1024:4096:7168,1024:7168:2048,512:7168:2048,256:7168:2048,512:4096:7168
for r in 1 2; do
  for cfg in m128n128s5g8x132c1 m128n128s5g8x132c2 m256n128s3g4x132c1 m256n128s3g4x132c2; do
    timeout 100 ./build/moekit bench gemm --no-baseline --shapes $SH --config $cfg > $OUT/g.txt 2>&1
    echo "$cfg r$r: $(awk '$1 ~ /^[0-9]+$/ && NF > 6 {printf "%sx%sx%s %s k%s | ", $1,$2,$3,$5,$8}' $OUT/g.txt)"
  done
done
tail -3 $OUT/g.txt
for cfg in m128n128s5g8x132c1 m128n128s5g8x132c2; do
  echo "== trace 512x7168x2048 $cfg"
  MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench gemm --no-baseline --reps 2 --shapes 512:7168:2048 --config $cfg 2>&1 | grep -A3 "moekit trace" | tail -4 | cut -c1-400
done
echo "total $(( $(date +%s) - t0 )) s"
