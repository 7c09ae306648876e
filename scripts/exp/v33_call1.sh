# v33 device call 1: the guessed first tile's L2 prefetch (GemmParams::first_prefetch, MOEKIT_FIRST_PREFETCH) and the
# B-scale rows' L1 prefetch (compile-time MOEKIT_SB_PREFETCH): masked and grouped tests, then DeepGEMM's masked rows
# under the four combinations, three interleaved rounds; traces of 1 x 1024 (4096, 7168); the decode-like cases.
GTEST_FILTER='GroupedGemm*:GemmFp8.DirectStore:GemmFp8.TailHalves' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2 3; do
  MOEKIT_FIRST_PREFETCH=0 MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=0 masked_round "r$r fp0 sb0"
  MOEKIT_FIRST_PREFETCH=1 MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=0 masked_round "r$r fp1 sb0"
  MOEKIT_FIRST_PREFETCH=0 masked_round "r$r fp0 sb1"
  MOEKIT_FIRST_PREFETCH=1 masked_round "r$r fp1 sb1"
done
for fp in 0 1; do
  echo "trace first_prefetch=$fp"; MOEKIT_FIRST_PREFETCH=$fp trace_masked "" masked:1:1024:4096:7168
  MOEKIT_FIRST_PREFETCH=$fp trace_masked "" masked:2:512:7168:2048
done
for fp in 0 1; do
  MOEKIT_FIRST_PREFETCH=$fp timeout 150 ./build/moekit bench grouped --no-baseline > $OUT/g$fp.txt 2>&1
  echo "grouped first_prefetch=$fp: $(awk '($1 == "masked" || $1 == "decode" || $1 == "contiguous") {printf "%s%s/%s/%s %s k%s | ", substr($1,1,1), $2, $6, $7, $8, $14}' $OUT/g$fp.txt)"
  grep -i "bandwidth\|copy" $OUT/g$fp.txt | head -4
done
echo "total $(( $(date +%s) - t0 )) s"
