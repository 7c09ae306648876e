# v32 device call 1: the direct-store bf16 epilogue (GemmConfig::direct_store, suffix r: D from registers, no staging
# tile, so one more stage: m256n128 4 instead of 3, m128n128 6 instead of 5). Its GPU tests (+ the unchanged masked
# and wide-tile tests), then two interleaved rounds of A/B: DeepGEMM's six masked rows under the default picks and
# under forced s4r / s6r configurations, the contiguous 1300 case, dense M = 4096; one trace of masked 1 x 1024
# (4096, 7168) each way.
# (v32_call2.sh re-runs this with other lists: GTEST_FILTER, MASKED_CFGS, CONTIG_CFGS.)
GTEST_FILTER=${GTEST_FILTER:-'GemmFp8.DirectStore:GroupedGemmDirectStore.*:GroupedGemmMasked.*:GroupedGemmWideTiles.*:GemmFp8.TailHalves'}
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
MASKED_CFGS=${MASKED_CFGS:-"m256n128s3g4x132c1 m256n128s4g4x132c1r m128n128s5g8x132c1 m128n128s6g8x132c1r"}
for r in 1 2; do
  masked_round "r$r default"
  for cfg in $MASKED_CFGS; do MOEKIT_GROUPED_CONFIG=$cfg masked_round "r$r $cfg"; done
done
CONTIG="--case contiguous:4:8192:4096:7168 --case contiguous:4:8192:7168:2048"
for r in 1 2; do
  for cfg in "" ${CONTIG_CFGS:-m256n128s3g8x132c2 m256n128s4g8x132c2r m256n128s4g8x132c1r}; do
    MOEKIT_GROUPED_CONFIG=$cfg timeout 120 ./build/moekit bench grouped --no-baseline $CONTIG > $OUT/c.txt 2>&1
    echo "r$r contiguous ${cfg:-default}: $(awk '$1 == "contiguous" {printf "%s/%s/%s %s %s k%s | ", $2, $6, $7, $8, $9, $14}' $OUT/c.txt)"
  done
  for cfg in "" m256n128s4g8x132c2r m128n128s6g8x132c1r; do
    timeout 120 ./build/moekit bench gemm --no-baseline --shapes 4096:7168:16384,4096:4096:7168,4096:7168:2048,1024:4096:7168 ${cfg:+--config $cfg} > $OUT/g.txt 2>&1
    echo "r$r dense ${cfg:-default}: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s %s | ", $1, $2, $3, $5, $6}' $OUT/g.txt)"
  done
done
for cfg in m256n128s3g4x132c1 m256n128s4g4x132c1r; do trace_masked $cfg masked:1:1024:4096:7168; done
echo "total $(( $(date +%s) - t0 )) s"
