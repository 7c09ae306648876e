# v21 device call 2: the whole GPU suite with the heuristic choosing 256-row tiles, then the wave
# issue-order A/B (MOEKIT_WAVE_ORDER=0 through MOEKIT_JIT_DEFINES) on the contiguous and dense cases.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
C="--case contiguous:4:8192:4096:7168 --case contiguous:4:8192:7168:2048 --case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048"
for r in 1 2; do
  for o in 1 0; do
    MOEKIT_JIT_DEFINES=MOEKIT_WAVE_ORDER=$o timeout 100 ./build/moekit bench grouped --no-baseline $C > $OUT/order${o}_r$r.txt 2>&1
    echo "order=$o r$r: $(awk '($1 == "contiguous" || $1 == "masked") {printf "%s%s/%s/%s %s us kern %s | ", substr($1,1,1), $2, $6, $7, $8, $14}' $OUT/order${o}_r$r.txt)"
    MOEKIT_JIT_DEFINES=MOEKIT_WAVE_ORDER=$o timeout 100 ./build/moekit bench gemm --no-baseline --shapes 4096:7168:16384,4096:4096:7168 > $OUT/gorder${o}_r$r.txt 2>&1
    echo "   gemm: $(awk '$1 ~ /^[0-9]+$/ && NF > 5 {printf "%sx%sx%s %s %s %s | ", $1, $2, $3, $4, $5, $6}' $OUT/gorder${o}_r$r.txt)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
