# v20 device call 7: 64-row A boxes for tail-half launches and the heuristic's halves term.
# GPU suite; masked A/B (MOEKIT_TAIL_HALVES=0 / 1); the dense picks the halves term changed, old
# pick vs new pick (forced, interleaved); then bench grouped, bench gemm and the main job.
source scripts/exp/gpu_suite.sh
CASES="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168"
for h in 0 1 0 1; do
  MOEKIT_TAIL_HALVES=$h timeout 100 ./build/moekit bench grouped --no-baseline $CASES > $OUT/ab.txt 2>&1
  echo "halves=$h: $(awk '$1 == "masked" {printf "%s/%s/%s us %s kern %s | ", $2, $6, $7, $8, $14}' $OUT/ab.txt)"
done
while read shape old new; do
  line="$shape"
  for cfg in $old $new; do
    us=$(timeout 60 ./build/moekit bench gemm --no-baseline --reps 50 --shapes $shape --config $cfg 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print $5}')
    line="$line | $cfg $us"
  done
  echo "$line"
done <<'LIST'
1024:5120:7168 m128n160s5g8x132c1 m128n128s5g8x132c1
1536:5760:2880 m128n192s4g8x132c1 m128n128s5g8x132c1
3000:1024:7168 m128n96s7g8x132c1 m128n128s5g8x132c1
3000:2880:2880 m128n192s4g8x132c1 m128n128s5g8x132c1
4096:2112:2880 m128n192s4g8x132c1 m128n128s5g8x132c1
6144:2112:7168 m128n192s4g8x132c1 m128n128s5g8x132c1
4096:7168:512 m128n160s5g8x132c1 m128n192s4g8x132c1
8192:5120:512 m128n128s5g8x132c1 m128n192s4g8x132c1
6144:576:512 m128n128s5g8x132c1 m128n144s5g8x132c1
1000:7168:512 m128n160s5g8x132c1 m128n128s5g8x132c1
LIST
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
grep -E "^layout|^(contiguous|masked|decode)|geomean" $OUT/bench_grouped.txt | cut -c1-230
timeout 200 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
grep -E "^ *M |^ *[0-9]+ |geomean|bandwidth" $OUT/bench_gemm.txt | cut -c1-200
timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
grep -v "^# moekit" $OUT/bench_moe.txt | grep -E "^deepseek|^# stages|^preset" | cut -c1-150
echo "total $(( $(date +%s) - t0 )) s"
