# (Needs the commit before the revert of "bf16 epilogue: stage one column atom at a time"; kept as the record of v31 call 9.)
# v31 final check 2 (one-atom D staging: 128 x 128 tiles now run 6 stages by default): the whole GPU suite, memcheck
# and racecheck on masked / contiguous tests, bench gemm / grouped / the main job, three rounds of DeepGEMM's masked
# rows, then an A/B of 5 vs 6 stages on the masked rows and on dense shapes that pick 128 x 128 tiles.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='GroupedGemmMasked.RandomCounts:GroupedGemmContiguous.LayoutsAndShapes:GroupedGemmWideTiles.ContiguousAndMasked' \
RACECHECK_FILTER='GroupedGemmMasked.RandomCounts' MEMCHECK_TIMEOUT=150 RACECHECK_TIMEOUT=120 session_final
for r in 1 2; do
for cfg in m128n128s5g8x132c1 m128n128s6g8x132c1; do
  echo "r$r $cfg: $(MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline --reps 20 $MASKED 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
  echo "r$r dense $cfg: $(timeout 60 ./build/moekit bench gemm --no-baseline --reps 20 --shapes 4096:2112:7168,1024:4096:7168,4096:4096:7168 --config $cfg 2>&1 | awk '$1 ~ /^[0-9]+$/ {printf "%sx%sx%s %s k%s | ", $1, $2, $3, $5, $8}')"
done
done
echo "total $(( $(date +%s) - t0 )) s"
