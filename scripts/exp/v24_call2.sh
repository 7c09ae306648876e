# v24 device call 2: 256-row tiles narrower than 128 columns on the masked (7168, 2048) rows, where
# 7168 / 112 = 64 N blocks make 256 tiles (1.94 waves) instead of 224 (1.7) or 448 (3.39) -- forced
# through MOEKIT_GROUPED_CONFIG, two interleaved rounds, event-timed us and kernel-only us.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168"
for r in 1 2; do
  for cfg in default m256n112s3g4x132c1 m256n120s3g4x132c1 m256n104s3g4x132c1 m256n112s3g4x132c2; do
    if [ $cfg = default ]; then unset MOEKIT_GROUPED_CONFIG; else export MOEKIT_GROUPED_CONFIG=$cfg; fi
    masked_round "$cfg r$r"
  done
done
unset MOEKIT_GROUPED_CONFIG
grep -i "error\|fail" $OUT/m.txt | head -3
for cfg in m256n112s3g4x132c1; do
  for c in masked:2:512:7168:2048 masked:4:256:7168:2048; do
  echo "== trace $c $cfg"
  MOEKIT_GROUPED_CONFIG=$cfg MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case $c 2>&1 | grep -A3 "moekit trace" | tail -4 | cut -c1-400
  done
done
echo "total $(( $(date +%s) - t0 )) s"
