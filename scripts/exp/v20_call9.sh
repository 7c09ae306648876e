# v20 device call 9: the main job with the cool-down before its long passes (default), then without.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
for cd in 1500 0; do
  timeout 280 ./build/moekit bench moe --preset deepseek-v3 --cooldown-ms $cd > $OUT/bench_moe_cd$cd.txt 2>&1
  echo "== cooldown $cd ms"
  grep -v "^# moekit" $OUT/bench_moe_cd$cd.txt | grep -E "^deepseek|^# stages.*(4096|16384)|^preset" | cut -c1-200
done
echo "total $(( $(date +%s) - t0 )) s"
