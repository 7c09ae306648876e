# v33 device call 3: the B-scale L1 prefetch in three forms (MOEKIT_SB_PREFETCH 0 none / 1 every tile's lines /
# 2 the first tile's lines and the later tiles' past the first) on DeepGEMM's masked rows, dense, contiguous and the
# MoE layer; traces of 1 x 1024 (4096, 7168) with the SM clock over the K loop: default, no loads (diagnostic),
# issue turns per wave.
GTEST_FILTER='GemmFp8.*:GroupedGemm*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2 3; do
  for sb in 0 1 2; do MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=$sb masked_round "r$r sb=$sb"; done
done
DENSE=4096:7168:16384,4096:4096:7168,4096:7168:2048,1024:4096:7168,1024:7168:2048,128:24576:1536,64:7168:2048,2048:2112:7168
for r in 1 2; do
  for sb in 0 1 2; do
    MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=$sb timeout 120 ./build/moekit bench gemm --no-baseline --shapes $DENSE > $OUT/s.txt 2>&1
    echo "r$r sb=$sb dense: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/s.txt)"
    MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=$sb timeout 100 ./build/moekit bench grouped --no-baseline --case contiguous:4:8192:4096:7168 --case contiguous:8:4096:7168:2048 > $OUT/c.txt 2>&1
    echo "r$r sb=$sb contiguous: $(awk '$1 == "contiguous" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}' $OUT/c.txt)"
  done
done
for r in 1 2; do
  for sb in 0 1 2; do moe_round sb$sb $r 1,8,1024,4096 MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=$sb; done
done
echo "trace default"; trace_masked "" masked:1:1024:4096:7168
echo "trace no loads"; MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1 trace_masked "" masked:1:1024:4096:7168
echo "trace wave order"; MOEKIT_JIT_DEFINES=MOEKIT_WAVE_ORDER=1 trace_masked "" masked:1:1024:4096:7168
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:7168:2048"
for r in 1 2; do
  masked_round "r$r default"; MOEKIT_JIT_DEFINES=MOEKIT_WAVE_ORDER=1 masked_round "r$r wave order"
done
echo "total $(( $(date +%s) - t0 )) s"
