# v23 device call 5: the masked scheduler's first count read before the CTA barrier
# (MOEKIT_SCHED_PRELOAD, A/B through MOEKIT_JIT_DEFINES), masked tests, then the masked rows
# (kernel-only and events) in four interleaved rounds, and one trace each way.
# (A record of what ran: the MOEKIT_SCHED_PRELOAD switch was removed after the call, as it measured no change; perf-notes v23.)
GTEST_FILTER='GroupedGemm*' source scripts/exp/gpu_suite.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048 --case masked:32:64:4096:7168 --case masked:256:16:7168:2048"
for r in 1 2 3 4; do
  for v in 0 1; do
    MOEKIT_JIT_DEFINES=MOEKIT_SCHED_PRELOAD=$v timeout 60 ./build/moekit bench grouped --no-baseline $MASKED > $OUT/m.txt 2>&1
    echo "preload=$v r$r: $(awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}' $OUT/m.txt)"
  done
done
for v in 0 1; do
  MOEKIT_JIT_DEFINES=MOEKIT_SCHED_PRELOAD=$v MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case masked:1:1024:7168:2048 2>&1 | grep -A2 "moekit trace" | tail -3
done
echo "total $(( $(date +%s) - t0 )) s"
