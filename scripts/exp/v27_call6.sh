# v27 device call 6: how much of the T = 16384 layer's GEMM stages is the power-capped clock? The
# same layer timed with 2, 10 (the bench default) and 30 back-to-back reps after the bench's
# cool-down; the plain grouped kernel on the same problems measured 6654 / 3379 µs with 10 reps.
for r in 2 10 30 2 10 30; do
  timeout 300 ./build/moekit bench moe --preset deepseek-v3 --tokens 16384 --no-baseline --no-check --reps $r > $OUT/moe_r$r.txt 2>&1
  echo "reps $r: $(awk '$1 == 16384 {print "us", $5}' $OUT/moe_r$r.txt) $(grep -m1 '# stages' $OUT/moe_r$r.txt | cut -c1-200)"
done
