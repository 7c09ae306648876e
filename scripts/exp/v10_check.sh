#!/bin/bash
# Device call: full GPU suite, the rule's A/B (dynamic where it pays vs all static), the main job.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
timeout 330 ./build/moekit_gpu_tests > $OUT/gpu_tests.log 2>&1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure" $OUT/gpu_tests.log | head -20
grep "rel_l2" $OUT/gpu_tests.log | awk '{print $NF}' | sort -t= -k2 -g | tail -3
echo "tests took $(( $(date +%s) - t0 )) s"
VARIANTS='-;MOEKIT_MOE_DYNAMIC=0' ROUNDS=3 BENCH_TOKENS=1,2,4,8,64,256 scripts/exp/ab_env.sh > $OUT/ab.txt
awk '/^r[0-9]/{v=$2; for(i=3;i<=NF;i++) if ($i ~ /^deepseek/) {T=$(i+1); us=$(i+4)}; key=v" T="T; s[key]=s[key]" "us} END{for(k in s) print k": "s[k]}' $OUT/ab.txt | sort
timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
cat $OUT/bench_moe.txt | grep -v "^# moekit"
timeout 200 ./build/moekit bench moe --preset all --tokens 1,64,1024,16384 --no-baseline > $OUT/bench_moe_all.txt 2>&1
grep -E "^ *[a-z]" $OUT/bench_moe_all.txt | grep -v "^# " | awk '{print $1, $2, $4, $5, $11}'
echo "total $(( $(date +%s) - t0 )) s"
