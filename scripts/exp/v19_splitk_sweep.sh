# v19 device call: split-K correctness (GPU tests) and a configuration sweep of small-M dense shapes.

GTEST_FILTER='GemmFp8.SplitK*:GemmFp8.EveryTileShape:GemmFp8.CudaGraphReplay:GemmFp8.ValidatesArguments'
source scripts/exp/gpu_suite.sh
SH=""
for m in ${SWEEP_MS:-16 64 128 256}; do
  for nk in 2112:7168 24576:1536 32768:512 7168:16384 4096:7168 7168:2048; do SH="$SH,$m:$nk"; done
done
t1=$(date +%s)
timeout 400 ./build/moekit bench gemm --no-baseline --sweep --shapes ${SH#,} > $OUT/sweep.txt 2>&1
echo "sweep rc=$? took $(( $(date +%s) - t1 )) s"
grep "best" $OUT/sweep.txt
