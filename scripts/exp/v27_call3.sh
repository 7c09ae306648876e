# v27 device call 3: the fill probe's multicast variants, and per-CTA traces of the masked
# 1 x 1024 (4096, 7168) row with single CTAs (c1) and A-sharing pairs (c2): does the pair's K loop
# run faster (the fill ceiling is on requested bytes) while its fixed costs grow?
cd build && timeout 60 ./moekit_fill_probe | grep -E 'mc|b64'; cd ..
for cfg in m256n128s3g1x128c1 m256n128s3g4x128c2 m256n128s3g1x128c1 m256n128s3g4x128c2; do
  echo "== $cfg"
  MOEKIT_GROUPED_CONFIG=$cfg MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --cooldown-ms 0 --case masked:1:1024:4096:7168 2>&1 | grep -A6 "moekit trace" | tail -7
  MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline --case masked:1:1024:4096:7168 2>&1 | awk '$1 == "masked" {printf "us %s TF %s kern %s\n", $8, $9, $14}'
done
