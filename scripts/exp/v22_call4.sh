# v22 device call 4: the prefill GEMM2 (rows: the plain contiguous grouped GEMM with bf16 out, which
# MOEKIT_GROUPED_CONFIG reaches; MOEKIT_MOE_GEMM2_CONFIG only reaches the scatter-add GEMM2) as
# 256-row tiles, single or in pairs sharing A: bench grouped on GEMM2's problem (256 x 512 rows,
# (7168, 2048)) and the main job at T = 4096 / 16384, default vs m256n128s3 c1 vs c2, two rounds.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
source scripts/exp/bench_lib.sh
t0=$(date +%s)
for r in 1 2; do
  for cfg in default m256n128s3g8x132c1 m256n128s3g8x132c2; do
    if [ $cfg = default ]; then unset MOEKIT_GROUPED_CONFIG; else export MOEKIT_GROUPED_CONFIG=$cfg; fi
    timeout 100 ./build/moekit bench grouped --no-baseline --case contiguous:256:512:7168:2048 --case contiguous:256:128:7168:2048 > $OUT/g_${cfg}_r$r.txt 2>&1
    echo "grouped $cfg r$r: $(awk '$1 == "contiguous" {printf "%s/%s/%s %s us %s TF kern %s | ", $2, $6, $7, $8, $9, $14}' $OUT/g_${cfg}_r$r.txt)"
    MOEKIT_LOG_CONFIG=$([ $r = 1 ] && echo 1 || echo 0) timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline > $OUT/moe_${cfg}_r$r.txt 2>&1
    echo "moe $cfg r$r: $(moe_summary $OUT/moe_${cfg}_r$r.txt)"
    [ $r = 1 ] && grep "fp8_gemm_contiguous" $OUT/moe_${cfg}_r$r.txt | sort | uniq -c | head -3
  done
done
unset MOEKIT_GROUPED_CONFIG
echo "total $(( $(date +%s) - t0 )) s"
