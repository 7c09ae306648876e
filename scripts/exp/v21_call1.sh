# v21 device call 1: 256-row tiles (two 128-row waves). Tests of the new paths (dense, tail halves,
# contiguous / masked wide tiles, the MoE layer with GEMM2 forced to 256-row tiles), then A/Bs:
# bench grouped contiguous cases default vs forced m256 (raster groups 4 and 8), bench gemm on three
# M = 4096 shapes, and the MoE layer at T = 4096 / 16384 with GEMM2 forced to m256.
export GTEST_FILTER='GemmFp8.EveryTileShape:GemmFp8.TailHalves:GemmFp8.RandomShapes:GroupedGemmWideTiles.*:GroupedGemmContiguous.*:GroupedGemmMasked.*'
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MOEKIT_MOE_GEMM2_CONFIG=m256n128s4g8x132c1 timeout 200 ./build/moekit_gpu_tests --gtest_filter='MoeLayer*:MoeGemm2*' > $OUT/moe_tests_m256.log 2>&1
echo "moe tests with GEMM2 m256: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/moe_tests_m256.log | tr '\n' ' ')"
grep -E "Failure|FAILED  \]" $OUT/moe_tests_m256.log | head -5
echo "after tests $(( $(date +%s) - t0 )) s"
C="--case contiguous:4:8192:4096:7168 --case contiguous:8:4096:4096:7168 --case contiguous:4:8192:7168:2048 --case contiguous:8:4096:7168:2048"
for r in 1 2; do
  for cfg in default m256n128s3g4x132c1 m256n128s3g8x132c1; do
    if [ $cfg = default ]; then unset MOEKIT_GROUPED_CONFIG; else export MOEKIT_GROUPED_CONFIG=$cfg; fi
    MOEKIT_LOG_CONFIG=$([ $r = 1 ] && echo 1 || echo 0) timeout 100 ./build/moekit bench grouped --no-baseline $C > $OUT/g_${cfg}_r$r.txt 2>&1
    echo "$cfg r$r: $(awk '$1 == "contiguous" {printf "%s/%s/%s %s us %s TF kern %s | ", $2, $6, $7, $8, $9, $14}' $OUT/g_${cfg}_r$r.txt)"
    [ $r = 1 ] && grep -m2 "moekit: fp8_gemm" $OUT/g_${cfg}_r$r.txt
  done
done
unset MOEKIT_GROUPED_CONFIG
S=4096:7168:16384,4096:4096:7168,4096:24576:1536,8192:7168:7168
for r in 1 2; do
  for cfg in default m256n128s3g8x132c1; do
    opt=$([ $cfg = default ] || echo "--config $cfg")
    timeout 100 ./build/moekit bench gemm --no-baseline --shapes $S $opt > $OUT/gemm_${cfg}_r$r.txt 2>&1
    echo "gemm $cfg r$r: $(awk '$1 ~ /^[0-9]+$/ && NF > 5 {printf "%sx%sx%s %s %s | ", $1, $2, $3, $5, $6}' $OUT/gemm_${cfg}_r$r.txt)"
  done
done
for r in 1 2; do
  for cfg in default m256n128s4g8x132c1; do
    if [ $cfg = default ]; then unset MOEKIT_MOE_GEMM2_CONFIG; else export MOEKIT_MOE_GEMM2_CONFIG=$cfg; fi
    MOEKIT_LOG_CONFIG=$([ $r = 1 ] && echo 1 || echo 0) timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline > $OUT/moe_${cfg}_r$r.txt 2>&1
    echo "moe $cfg r$r: $(moe_summary $OUT/moe_${cfg}_r$r.txt)"
    [ $r = 1 ] && grep "moe_gemm2" $OUT/moe_${cfg}_r$r.txt | sort | uniq -c | head -3
  done
done
unset MOEKIT_MOE_GEMM2_CONFIG
echo "total $(( $(date +%s) - t0 )) s"
