# v33 device call 9: call 8's T = 16384 A/B again, five interleaved rounds each (v32 B-scale reads vs HEAD).
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
V32=MOEKIT_JIT_DEFINES=MOEKIT_SB_AHEAD=0,MOEKIT_SB_PREFETCH=0
for r in 1 2 3 4 5; do
  if [ $((r % 2)) = 1 ]; then moe_round v32reads $r 16384 $V32; moe_round head $r 16384
  else moe_round head $r 16384; moe_round v32reads $r 16384 $V32; fi
done
for f in $OUT/ab_*_r*.txt; do echo "$(basename $f): $(grep '# stages.*16384' $f | sed 's/.*(us)://' | cut -c1-160)"; done
echo "total $(( $(date +%s) - t0 )) s"
