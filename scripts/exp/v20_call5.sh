# v20 device call 5: the GPU suite (compiling into .jitcache) with the reworked idle warpgroup,
# the tail-halves A/B on the masked cases, then bench grouped, bench gemm and the main job.
source scripts/exp/gpu_suite.sh
tar czf $OUT/jitcache.tgz .jitcache
CASES="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168"
for r in 1 2; do
  for h in 0 1; do
    MOEKIT_TAIL_HALVES=$h timeout 100 ./build/moekit bench grouped --no-baseline $CASES > $OUT/ab_h${h}_r$r.txt 2>&1
    echo "halves=$h r$r: $(awk '$1 == "masked" {printf "%s/%s/%s us %s kern %s | ", $2, $6, $7, $8, $14}' $OUT/ab_h${h}_r$r.txt)"
  done
done
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
grep -E "^layout|^(contiguous|masked|decode)|geomean" $OUT/bench_grouped.txt | cut -c1-230
timeout 200 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
grep -E "^ *M |^ *[0-9]+ |geomean|bandwidth" $OUT/bench_gemm.txt | cut -c1-200
timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
grep -v "^# moekit" $OUT/bench_moe.txt | grep -E "^deepseek|^# stages|^preset" | cut -c1-150
echo "total $(( $(date +%s) - t0 )) s"
