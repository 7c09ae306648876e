# v25 device call 2: where the prefill permute + quantize pass spends its time (deepseek-v3, T = 16384):
# a temporary switch (MOEKIT_TMP_SKIP, results wrong, removed after the call) drops its scattered 4-byte scale stores (1), its
# FP8 code stores (2) or both (3); the permute_quant stage time of each, two interleaved rounds.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for r in 1 2; do
  for s in 0 1 2 3; do
    MOEKIT_TMP_SKIP=$s timeout 120 ./build/moekit bench moe --preset deepseek-v3 --tokens 16384 --no-baseline --no-check > $OUT/p$s$r.txt 2>&1
    echo "skip=$s r$r: $(grep -h '^# stages.*16384' $OUT/p$s$r.txt | sed 's/.*(us)://' | cut -c1-140)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
