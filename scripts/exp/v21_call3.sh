# v21 device call 3: the wide-tile tests with contiguous tail halves, the halves A/B on the
# contiguous cases, bench grouped (DeepGEMM's table, with cuBLASLt) with and without 256-row tiles
# (MOEKIT_WIDE_TILES=0), and bench gemm --sweep on shapes where the heuristic now picks narrow or
# mid-M 256-row tiles.
export GTEST_FILTER='GroupedGemmWideTiles.*:GroupedGemmContiguous.*:GemmFp8.TailHalves:GemmFp8.EveryTileShape'
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
C="--case contiguous:4:8192:4096:7168 --case contiguous:8:4096:4096:7168 --case contiguous:4:8192:7168:2048"
for r in 1 2; do
  for h in 0 1; do
    MOEKIT_TAIL_HALVES=$h timeout 100 ./build/moekit bench grouped --no-baseline $C > $OUT/h${h}_r$r.txt 2>&1
    echo "halves=$h r$r: $(awk '$1 == "contiguous" {printf "%s/%s/%s %s us %s TF kern %s | ", $2, $6, $7, $8, $9, $14}' $OUT/h${h}_r$r.txt)"
  done
done
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
show_grouped $OUT/bench_grouped.txt
MOEKIT_WIDE_TILES=0 timeout 150 ./build/moekit bench grouped --no-baseline > $OUT/bench_grouped_nowide.txt 2>&1
echo "== no wide tiles"; show_grouped $OUT/bench_grouped_nowide.txt
echo "grouped took $(( $(date +%s) - t0 )) s"
timeout 150 ./build/moekit bench gemm --sweep --no-baseline --shapes 4096:2112:7168,2048:2112:7168,1024:7168:2048,1024:4096:7168 > $OUT/sweep.txt 2>&1
grep -E "^# sweep.*best" $OUT/sweep.txt | cut -c1-160
echo "total $(( $(date +%s) - t0 )) s"
