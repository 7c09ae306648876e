# v24 device call 3: the scheduler warp prefetches each published tile's B rows into L2, row by
# row (MOEKIT_DIAG_BPF = K blocks per row, 0 = off), on the masked rows; three interleaved rounds,
# event-timed us and kernel-only us; then one trace each way on 4 x 256 (7168, 2048).
# (A record of what ran: the switch it sets was removed after the call, as it measured slower; perf-notes v24.)
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168 --case masked:4:256:4096:7168"
for r in 1 2 3; do
  for v in 0 4 16 64; do
    MOEKIT_JIT_DEFINES=MOEKIT_DIAG_BPF=$v masked_round "bpf=$v r$r"
  done
done
grep -i "error\|fail" $OUT/m.txt | head -3
for v in 0 16; do
  for c in masked:4:256:7168:2048 masked:1:1024:4096:7168; do
  echo "== trace $c bpf=$v"
  MOEKIT_JIT_DEFINES=MOEKIT_DIAG_BPF=$v MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case $c 2>&1 | grep -A3 "moekit trace" | tail -3 | cut -c1-400
  done
done
echo "total $(( $(date +%s) - t0 )) s"
