# v25 device call 4: the token-scale permute at the sizes around its threshold (T * k >= 4096), A/B with
# MOEKIT_TMP_TS0=1 (per-slot scale stores; a temporary switch, removed after the call): two interleaved rounds, all threshold
# sides: deepseek-v3, gpt-oss-120b (k = 4) and mixtral-8x7b (k = 2), layer us and the permute stage.
[ -n "$V25_SUITE_DONE" ] || SKIP_TESTS=1 source scripts/exp/gpu_suite.sh  # (v25_call5.sh runs its tests first)
source scripts/exp/bench_lib.sh
stage() { grep -h "^# stages.*T=$2 " $1 | grep -o "permute_quant [0-9.]*\|sort_quantize [0-9.]*\|quantize [0-9.]*" | head -1; }
for r in 1 2; do
  for v in new old; do
    if [ $v = old ]; then export MOEKIT_TMP_TS0=1; else unset MOEKIT_TMP_TS0; fi
    timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 1,64,4096 --no-baseline --no-check > $OUT/ds_$v$r.txt 2>&1
    line=""
    for t in 1 64 4096; do line="$line T=$t $(awk -v t=$t '$1 ~ /^deepseek/ && $2 == t {print $5}' $OUT/ds_$v$r.txt) [$(stage $OUT/ds_$v$r.txt $t)] |"; done
    echo "ds $v r$r:$line"
    timeout 150 ./build/moekit bench moe --preset gpt-oss-120b --tokens 1024,4096,16384 --no-baseline --no-check > $OUT/go_$v$r.txt 2>&1
    line=""
    for t in 1024 4096 16384; do line="$line T=$t $(awk -v t=$t '$1 ~ /^gpt/ && $2 == t {print $5}' $OUT/go_$v$r.txt) [$(stage $OUT/go_$v$r.txt $t)] |"; done
    echo "gpt-oss $v r$r:$line"
    timeout 150 ./build/moekit bench moe --preset mixtral-8x7b --tokens 1,512,1024,2048,4096 --no-baseline --no-check > $OUT/mx_$v$r.txt 2>&1
    line=""
    for t in 1 512 1024 2048 4096; do line="$line T=$t $(awk -v t=$t '$1 ~ /^mixtral/ && $2 == t {print $5}' $OUT/mx_$v$r.txt) [$(stage $OUT/mx_$v$r.txt $t)] |"; done
    echo "mixtral $v r$r:$line"
  done
done
unset MOEKIT_TMP_TS0
echo "total $(( $(date +%s) - t0 )) s"
