# v25 device call 1: the promotion of warpgroups whose columns straddle two B-scale blocks, with the
# split fixed at compile time (promote_dispatch) against the run-time per-chunk select of v24
# (MOEKIT_JIT_DEFINES=MOEKIT_TMP_OLD_SFB=1, a temporary switch removed after the call): tests, forced dense tile widths,
# DeepGEMM's masked rows with forced narrow tiles, the decode main job.
GTEST_FILTER='GemmFp8.*:Grouped*:MoeGemm*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
ab() { if [ $1 = old ]; then export MOEKIT_JIT_DEFINES=MOEKIT_TMP_OLD_SFB=1; else unset MOEKIT_JIT_DEFINES; fi; }
echo "== dense 4096x7168x7168, forced configs, us (events, 10 reps)"
for r in 1 2; do
  for v in new old; do
    ab $v
    line=""
    for cfg in m128n128s5g8x132c1 m128n112s5g8x132c1 m128n96s5g8x132c1 m128n120s5g8x132c1 m128n64s6g8x132c1 \
               m128n160s4g8x132c1 m128n192s4g8x132c1 m256n112s3g8x132c1 m256n128s3g8x132c1; do
      us=$(timeout 60 ./build/moekit bench gemm --no-baseline --shapes 4096:7168:7168 --config $cfg --reps 10 2>&1 | awk '$1 == "4096" {print $5}')
      line="$line ${cfg%%g8x132c1}=$us"
    done
    echo "$v r$r:$line"
  done
done
echo "== 4096x2112x7168 (us): default and straddling widths"
for v in new old; do
  ab $v
  line=""
  for cfg in default m128n192s4g8x132c1 m128n144s4g8x132c1 m128n112s5g8x132c1; do
    if [ $cfg = default ]; then c=""; else c="--config $cfg"; fi
    us=$(timeout 60 ./build/moekit bench gemm --no-baseline --shapes 4096:2112:7168 $c --reps 10 2>&1 | awk '$1 == "4096" {print $5}')
    line="$line ${cfg%%g8x132c1}=$us"
  done
  echo "$v:$line"
done
MASKED="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168"
for r in 1 2; do
  for v in new old; do
    ab $v
    for cfg in default m256n112s3g4x132c1 m128n112s5g4x132c1; do
      if [ $cfg = default ]; then unset MOEKIT_GROUPED_CONFIG; else export MOEKIT_GROUPED_CONFIG=$cfg; fi
      masked_round "$v $cfg r$r"
    done
  done
done
unset MOEKIT_GROUPED_CONFIG
for r in 1 2; do
  for v in new old; do
    ab $v
    timeout 120 ./build/moekit bench moe --preset deepseek-v3 --tokens 1,64,256 --no-baseline --no-check > $OUT/moe_$v$r.txt 2>&1
    echo "moe $v r$r: $(moe_summary $OUT/moe_$v$r.txt)"
  done
done
unset MOEKIT_JIT_DEFINES
echo "total $(( $(date +%s) - t0 )) s"
