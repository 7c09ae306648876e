# v22 device call 2 (heuristic picks pairs sharing A for long 256-row launches): the GPU suite,
# bench gemm and bench grouped (with cuBLASLt and cool-downs), then per-CTA timelines of the
# one-wave masked 1 x 1024 cases and a config sweep of their dense equivalents.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
gemm_grouped_benches
for c in masked:1:1024:4096:7168 masked:1:1024:7168:2048; do
  echo "== trace $c (last of the launches)"
  MOEKIT_TRACE_GEMM=masked timeout 60 ./build/moekit bench grouped --no-baseline --reps 3 --case $c 2>&1 | grep -A2 "moekit trace" | tail -3
done
timeout 150 ./build/moekit bench gemm --no-baseline --sweep --shapes 1024:4096:7168,1024:7168:2048 > $OUT/sweep.txt 2>&1
grep -E "^# sweep" $OUT/sweep.txt | sort -t' ' -k4 | head -40
echo "total $(( $(date +%s) - t0 )) s"
