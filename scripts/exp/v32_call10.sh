# v32 device call 10: B loaded with an L2 evict-first policy where each B tile is read by at most two M blocks of its
# group (GemmParams::b_evict_first; call 9's compile-time form measured masked 4 x 256 (7168, 2048) 37.8 -> 35.3 us).
# The masked and direct-store tests, then MOEKIT_B_EVICT_FIRST=0 (the hint with the default priority) vs 1 (default):
# DeepGEMM's masked rows (two rounds), bench grouped (contiguous, decode-like), bench gemm, the layer at T <= 4096.
GTEST_FILTER='GroupedGemmMasked.*:GroupedGemmDirectStore.*:GroupedGemmContiguous.LayoutsAndShapes:GemmFp8.RandomShapes' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2; do for e in 0 1; do MOEKIT_B_EVICT_FIRST=$e masked_round "r$r evict_first=$e"; done; done
for e in 0 1; do
  MOEKIT_B_EVICT_FIRST=$e timeout 150 ./build/moekit bench grouped --no-baseline > $OUT/grouped_e$e.txt 2>&1
  echo "grouped evict_first=$e: $(awk '$1 == "contiguous" {printf "c%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14} $1 == "decode" {printf "d%s/%s/%s %s %s%% | ", $2, $8, $9, $10, $13}' $OUT/grouped_e$e.txt)"
  MOEKIT_B_EVICT_FIRST=$e timeout 150 ./build/moekit bench gemm --no-baseline > $OUT/gemm_e$e.txt 2>&1
  echo "gemm evict_first=$e: $(awk '$1 ~ /^[0-9]+$/ && NF > 6 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/gemm_e$e.txt)"
done
for r in 1 2; do for e in 0 1; do moe_round e$e $r 1,8,64,256,1024,4096 MOEKIT_B_EVICT_FIRST=$e; done; done
echo "total $(( $(date +%s) - t0 )) s"
