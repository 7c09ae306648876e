# v27 device call 8: why the pair tail split slowed GEMM1 (call 7): per-CTA traces of GEMM1 at T = 4096.
for v in 1 0; do
  echo "== split=$v"
  MOEKIT_GEMM1_TAIL_SPLIT=$v MOEKIT_TRACE_DUMP=$OUT/dump_$v.txt MOEKIT_TRACE_GEMM=moe_gemm1 timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096 --no-baseline --no-check --reps 1 2>&1 | grep -A3 'moekit trace' | head -8
done
