# v32 device call 2: the direct-store epilogue with its closing barrier (call 1's build kept the next tile's K loop
# off the uniform datapath: BRA.DIV before each wgmma group, K loop +5%). Its GPU tests, then two interleaved rounds
# of DeepGEMM's masked rows under the default picks and forced configurations (m256n128s3r separates the epilogue
# from the 4th stage), the contiguous 1300 case and dense M = 4096 shapes; one trace of masked 1 x 1024 (4096, 7168)
# each way.
GTEST_FILTER='GemmFp8.DirectStore:GroupedGemmDirectStore.*:GemmFp8.TailHalves:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts'
source scripts/exp/gpu_suite.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
row() {  # row LABEL [CFG]: the masked rows, one line of event us / kernel-only us
  MOEKIT_GROUPED_CONFIG=$2 timeout 90 ./build/moekit bench grouped --no-baseline --reps 30 $MASKED > $OUT/m.txt 2>&1
  echo "$1: $(awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}' $OUT/m.txt)"
}
for r in 1 2; do
  row "r$r default      "
  row "r$r m256n128s3   " m256n128s3g4x132c1
  row "r$r m256n128s3r  " m256n128s3g4x132c1r
  row "r$r m256n128s4r  " m256n128s4g4x132c1r
  row "r$r m128n128s5   " m128n128s5g8x132c1
  row "r$r m128n128s6r  " m128n128s6g8x132c1r
done
CONTIG="--case contiguous:4:8192:4096:7168 --case contiguous:4:8192:7168:2048"
for r in 1 2; do
  for cfg in "" m256n128s4g8x132c2r m256n128s4g8x132c1r; do
    MOEKIT_GROUPED_CONFIG=$cfg timeout 120 ./build/moekit bench grouped --no-baseline $CONTIG > $OUT/c.txt 2>&1
    echo "r$r contiguous ${cfg:-default}: $(awk '$1 == "contiguous" {printf "%s/%s/%s %s %s k%s | ", $2, $6, $7, $8, $9, $14}' $OUT/c.txt)"
  done
  for cfg in "" m256n128s4g8x132c2r m128n128s6g8x132c1r; do
    timeout 120 ./build/moekit bench gemm --no-baseline --shapes 4096:7168:16384,4096:4096:7168,4096:7168:2048,1024:4096:7168 ${cfg:+--config $cfg} > $OUT/g.txt 2>&1
    echo "r$r dense ${cfg:-default}: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s %s | ", $1, $2, $3, $5, $6}' $OUT/g.txt)"
  done
done
for cfg in m256n128s3g4x132c1 m256n128s4g4x132c1r; do
  MOEKIT_GROUPED_CONFIG=$cfg MOEKIT_TRACE_GEMM=masked timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case masked:1:1024:4096:7168 2>&1 | grep -A3 "moekit trace" | tail -4 | cut -c1-400
done
echo "total $(( $(date +%s) - t0 )) s"
