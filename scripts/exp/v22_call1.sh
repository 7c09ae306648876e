# v22 device call 1: 256-row tiles in 2-CTA pairs sharing A (multicast of the A boxes along N).
# Tests of the paths the change touches, then A/Bs of forced m256n128 c1 vs c2, two rounds:
# bench grouped on DeepGEMM's (4096, 7168) / (7168, 2048) cases, bench gemm on five shapes.
export GTEST_FILTER='GemmFp8.EveryTileShape:GemmFp8.TailHalves:GemmFp8.RandomShapes:GroupedGemmWideTiles.*:GroupedGemmContiguous.*:GroupedGemmMasked.*:MoeGemm1*'
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
C="--case contiguous:4:8192:4096:7168 --case contiguous:8:4096:4096:7168 --case contiguous:4:8192:7168:2048 --case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168"
for r in 1 2; do
  for cfg in m256n128s3g8x132c1 m256n128s3g8x132c2; do
    export MOEKIT_GROUPED_CONFIG=$cfg
    MOEKIT_LOG_CONFIG=$([ $r = 1 ] && echo 1 || echo 0) timeout 100 ./build/moekit bench grouped --no-baseline $C > $OUT/g_${cfg}_r$r.txt 2>&1
    echo "$cfg r$r: $(awk '($1 == "contiguous" || $1 == "masked") {printf "%s%s/%s/%s %s us %s TF kern %s | ", substr($1,1,1), $2, $6, $7, $8, $9, $14}' $OUT/g_${cfg}_r$r.txt)"
    [ $r = 1 ] && grep "moekit: fp8_gemm" $OUT/g_${cfg}_r$r.txt | sort | uniq | head -6
  done
done
unset MOEKIT_GROUPED_CONFIG
S=4096:7168:16384,4096:4096:7168,8192:7168:7168,1024:4096:7168,4096:7168:2048
for r in 1 2; do
  for cfg in m256n128s3g8x132c1 m256n128s3g8x132c2; do
    timeout 100 ./build/moekit bench gemm --no-baseline --shapes $S --config $cfg > $OUT/gemm_${cfg}_r$r.txt 2>&1
    echo "gemm $cfg r$r: $(awk '$1 ~ /^[0-9]+$/ && NF > 5 {printf "%sx%sx%s %s %s | ", $1, $2, $3, $5, $6}' $OUT/gemm_${cfg}_r$r.txt)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
