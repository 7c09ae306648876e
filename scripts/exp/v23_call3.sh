# v23 device call 3: first-tile prefetch by the producer's idle warps (prefetch.global.L2 lines),
# A/B through MOEKIT_JIT_DEFINES=MOEKIT_FIRST_TILE_PREFETCH=0, three interleaved rounds; then a
# trace of the masked rows with it.
# (A record of what ran: the switches it sets were removed after the call, as the measurements were negative; perf-notes v23.)
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
run_variant() {  # NAME ROUND ENV...
  local name=$1 r=$2; shift 2
  env "$@" timeout 150 ./build/moekit bench grouped --no-baseline --cooldown-ms 0 > $OUT/g.txt 2>&1
  echo "$name r$r grouped: $(awk '($1 == "contiguous" || $1 == "masked") {printf "%s%s/%s/%s %s k%s | ", substr($1,1,1), $2, $6, $7, $8, $14}' $OUT/g.txt)"
  echo "   $(awk '$1 == "decode" {printf "d%s/%s/%s %s %s%% | ", $2, $6, $7, $8, $11}' $OUT/g.txt)"
  echo "   $(grep -E 'geomean.*DeepGEMM' $OUT/g.txt | sed 's/geomean of //' | tr '\n' ' ')"
  env "$@" timeout 100 ./build/moekit bench gemm --no-baseline --cooldown-ms 0 --shapes $S4096,1024:4096:7168,1024:7168:2048,64:4096:7168,64:2112:7168,128:7168:2048,1:4096:7168 > $OUT/d.txt 2>&1
  echo "$name r$r gemm: $(awk '$1 ~ /^[0-9]+$/ && NF > 6 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/d.txt)"
}
for r in 1 2 3; do
  run_variant old $r MOEKIT_JIT_DEFINES=MOEKIT_FIRST_TILE_PREFETCH=0
  run_variant new $r MOEKIT_NOTHING=1
done
for c in masked:1:1024:4096:7168 masked:1:1024:7168:2048 masked:4:256:7168:2048; do
  echo "== trace $c"
  MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --cooldown-ms 0 --case $c 2>&1 | grep -A3 "moekit trace" | tail -4
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
echo "total $(( $(date +%s) - t0 )) s"
