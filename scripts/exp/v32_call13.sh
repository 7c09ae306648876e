# v32 device call 13: calls 10-12 measured the long dense / contiguous launches 5-24% slower than call 4 (e.g.
# 4096x2112x7168 151-157 us against 124-125), since every B load carried an L2 cache hint (evict-normal where not
# evict-first). A/B on one machine: abbin/moekit_hint (the previous HEAD, hint on every B load) against HEAD's build
# (no hint unless b_evict_first), two interleaved rounds of bench gemm, bench grouped, the layer; then the GEMM tests.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for r in 1 2; do
  for b in abbin/moekit_hint build/moekit; do
    timeout 150 $b bench gemm --no-baseline > $OUT/g.txt 2>&1
    echo "r$r $b gemm: $(awk '$1 ~ /^[0-9]+$/ && NF > 6 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/g.txt)"
  done
done
for r in 1 2; do
  for b in abbin/moekit_hint build/moekit; do
    timeout 150 $b bench grouped --no-baseline > $OUT/c.txt 2>&1
    echo "r$r $b grouped: $(awk '$1 == "contiguous" || $1 == "masked" {printf "%s%s/%s/%s %s k%s | ", substr($1,1,1), $2, $6, $7, $8, $14} $1 == "decode" {printf "d%s/%s/%s %s | ", $2, $8, $9, $10}' $OUT/c.txt)"
  done
done
for r in 1 2; do
  BIN=abbin/moekit_hint moe_round hint $r 1,4096,16384
  BIN=build/moekit moe_round head $r 1,4096,16384
done
timeout 200 ./build/moekit_gpu_tests --gtest_filter='GemmFp8.*:GroupedGemm*:MoeGemm*' > $OUT/t.txt 2>&1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]" $OUT/t.txt | head
echo "total $(( $(date +%s) - t0 )) s"
