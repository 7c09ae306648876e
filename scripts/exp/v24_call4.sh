# v24 device call 4: upper bounds on the masked rows -- the epilogue skipped (MOEKIT_DIAG_NO_EPI=1)
# and the loads skipped after the first stages (MOEKIT_DIAG_NO_LOADS=1); both wrong results, timing
# only. Two interleaved rounds, event-timed and kernel-only us; traces of 4 x 256 (7168, 2048).
# (A record of what ran: MOEKIT_DIAG_NO_EPI, a timing-only bound, was removed after the call; MOEKIT_DIAG_NO_LOADS stays.)
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168"
for r in 1 2; do
  for v in none MOEKIT_DIAG_NO_EPI=1 MOEKIT_DIAG_NO_LOADS=1 MOEKIT_DIAG_NO_EPI=1,MOEKIT_DIAG_NO_LOADS=1; do
    if [ $v = none ]; then unset MOEKIT_JIT_DEFINES; else export MOEKIT_JIT_DEFINES=$v; fi
    masked_round "$v r$r"
  done
done
unset MOEKIT_JIT_DEFINES
for v in MOEKIT_DIAG_NO_EPI=1 MOEKIT_DIAG_NO_LOADS=1; do
  echo "== trace masked:4:256:7168:2048 $v"
  MOEKIT_JIT_DEFINES=$v MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case masked:4:256:7168:2048 2>&1 | grep -A3 "moekit trace" | tail -3 | cut -c1-400
done
echo "total $(( $(date +%s) - t0 )) s"
