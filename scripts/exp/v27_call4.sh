# v27 device call 4: per-CTA dumps (MOEKIT_TRACE_DUMP) of the one-wave masked rows: is the slow CTA
# of masked 1 x 1024 (4096, 7168) the same SM / tile every launch?
for cfg in m256n128s3g1x128c1; do
  MOEKIT_TRACE_DUMP=$OUT/dump_1x1024_4096.txt MOEKIT_GROUPED_CONFIG=$cfg MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 8 --cooldown-ms 0 --case masked:1:1024:4096:7168 > /dev/null 2>&1
done
MOEKIT_TRACE_DUMP=$OUT/dump_1x1024_7168.txt MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 8 --cooldown-ms 0 --case masked:1:1024:7168:2048 > /dev/null 2>&1
MOEKIT_TRACE_DUMP=$OUT/dump_4x256_7168.txt MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 8 --cooldown-ms 0 --case masked:4:256:7168:2048 > /dev/null 2>&1
wc -l $OUT/*.txt
