# v28 device call 5: the SwiGLU epilogue with bare MUFU 2^x / 1/x and the clamp out of the loop
# (8 instead of ~16 instructions per element). build_old/moekit is 83c3eff (v27's final build).
# (1) GEMM1 / layer tests; (2) same bits: rel_l2 of every preset, old and new binary; (3) deepseek-v3
# T = 4096, 8192, 16384 in three interleaved rounds and T = 1, 64 in two, old vs new.
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for b in old new; do
  bin=./build/moekit; [ $b = old ] && bin=./build_old/moekit
  timeout 300 $bin bench moe --preset all --tokens 1,7,1000,4096 --no-baseline --reps 2 > $OUT/acc_$b.txt 2>&1
  awk '$1 ~ /^[a-z]/ && $2 ~ /^[0-9]+$/ {print $1, $2, $4}' $OUT/acc_$b.txt > $OUT/accs_$b.txt
done
echo "rel_l2 lines: $(wc -l < $OUT/accs_new.txt); differing between old and new: $(diff $OUT/accs_old.txt $OUT/accs_new.txt | grep -c '^<') ($(( $(date +%s) - t0 )) s)"
paste -d' ' $OUT/accs_old.txt $OUT/accs_new.txt | tr '\n' ';' | cut -c1-1500
echo
for r in 1 2 3; do
  BIN=./build_old/moekit moe_round old $r 4096,8192,16384
  moe_round new $r 4096,8192,16384
done
for r in 1 2; do
  BIN=./build_old/moekit moe_round old $r 1,64
  moe_round new $r 1,64
done
echo "took $(( $(date +%s) - t0 )) s"
