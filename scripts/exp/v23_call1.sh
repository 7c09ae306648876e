# v23 device call 1 (diagnosis, no code change to the kernels' math): per-CTA, per-tile timelines
# (MOEKIT_TRACE_DUMP) of DeepGEMM's grouped rows, and forced configurations on the masked rows
# that stand below DeepGEMM's table.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
ROWS="masked:1:1024:4096:7168 masked:1:1024:7168:2048 masked:2:512:7168:2048 masked:4:256:7168:2048 masked:4:256:4096:7168 masked:2:512:4096:7168 contiguous:4:8192:4096:7168"
for c in $ROWS; do
  echo "== trace $c"
  MOEKIT_TRACE_DUMP=$OUT/trace_${c//:/_}.txt MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --cooldown-ms 0 --case $c 2>&1 | grep -A3 "moekit trace" | tail -4
done
variants() {  # CASE CONFIG...
  local c=$1; shift
  for cfg in default "$@"; do
    local env=""; [ "$cfg" != default ] && env="MOEKIT_GROUPED_CONFIG=$cfg"
    for r in 1 2; do
      env $env timeout 60 ./build/moekit bench grouped --no-baseline --case $c > $OUT/v.txt 2>&1
      echo "$c $cfg r$r: $(awk '$1 == "masked" || $1 == "contiguous" {printf "us %s TF %s kern %s", $8, $9, $14}' $OUT/v.txt) $(grep -m1 -i error $OUT/v.txt)"
    done
  done
}
variants masked:1:1024:4096:7168 m256n128s3g1x128c1 m256n128s3g4x128c2 m128n128s5g8x132c1 m128n192s4g8x132c1 m128n160s4g8x132c1
variants masked:4:256:7168:2048 m256n128s3g8x132c1 m128n192s4g8x132c1 m128n160s4g8x132c1 m128n112s5g8x132c1 m128n96s5g8x132c1 m128n64s5g8x132c1
variants masked:2:512:7168:2048 m256n128s3g8x132c1 m128n192s4g8x132c1 m128n112s5g8x132c1 m128n64s5g8x132c1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
echo "total $(( $(date +%s) - t0 )) s"
