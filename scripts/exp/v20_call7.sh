# v20 device call 7: 64-row A boxes for tail-half launches and the heuristic's halves term.
# GPU suite; masked A/B (MOEKIT_TAIL_HALVES=0 / 1); the dense picks the halves term changed, old
# pick vs new pick (forced, interleaved); then bench grouped, bench gemm and the main job.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
halves_ab 1 2
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
main_benches
echo "total $(( $(date +%s) - t0 )) s"
