# v33 device call 2: the guessed-tile prefetch moved to producer warp 2 and limited to F K blocks
# (MOEKIT_FIRST_PREFETCH=F); the B-scale L1 prefetch (MOEKIT_SB_PREFETCH) on the dense, contiguous and MoE shapes.
GTEST_FILTER='GroupedGemmMasked.*:GroupedGemmDirectStore.*:GroupedGemmWideTiles.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2 3; do
  for f in 0 1 2 4; do MOEKIT_FIRST_PREFETCH=$f masked_round "r$r F=$f"; done
done
for f in 0 1 2; do
  echo "trace F=$f"; MOEKIT_FIRST_PREFETCH=$f trace_masked "" masked:1:1024:4096:7168
done
MOEKIT_FIRST_PREFETCH=1 trace_masked "" masked:2:512:7168:2048
DENSE=4096:7168:16384,4096:4096:7168,4096:7168:2048,1024:4096:7168,1024:7168:2048,128:24576:1536,64:7168:2048,2048:2112:7168
for r in 1 2; do
  for sb in 0 1; do
    MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=$sb timeout 120 ./build/moekit bench gemm --no-baseline --shapes $DENSE > $OUT/s.txt 2>&1
    echo "r$r sb=$sb dense: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s %s | ", $1, $2, $3, $4, $5}' $OUT/s.txt)"
    MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=$sb timeout 100 ./build/moekit bench grouped --no-baseline --case contiguous:4:8192:4096:7168 --case contiguous:8:4096:7168:2048 > $OUT/c.txt 2>&1
    echo "r$r sb=$sb contiguous: $(awk '$1 == "contiguous" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}' $OUT/c.txt)"
  done
done
for r in 1 2; do
  moe_round sb0 $r 1,8,1024,4096 MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=0
  moe_round sb1 $r 1,8,1024,4096
done
echo "total $(( $(date +%s) - t0 )) s"
