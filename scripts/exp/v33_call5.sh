# v33 device call 5: B scales loaded one K block ahead (MOEKIT_SB_AHEAD) with and without the first tile's L1
# prefetch (MOEKIT_SB_PREFETCH=3), against v32 (0, 0) and call 4's best masked form (prefetch 2), two rounds.
GTEST_FILTER='GemmFp8.SplitK:GemmFp8.DirectStore:GemmFp8.RandomShapes:GroupedGemmMasked.*:GroupedGemmWideTiles.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
DENSE=4096:7168:16384,4096:4096:7168,4096:7168:2048,1024:4096:7168,1024:7168:2048,128:24576:1536,64:7168:2048,2048:2112:7168
for r in 1 2; do
  for v in "0 0" "0 2" "1 0" "1 3"; do
    set -- $v
    export MOEKIT_JIT_DEFINES="MOEKIT_SB_AHEAD=$1,MOEKIT_SB_PREFETCH=$2"
    tag="a$1p$2"
    masked_round "r$r $tag"
    timeout 150 ./build/moekit bench grouped --no-baseline > $OUT/g.txt 2>&1
    echo "r$r $tag grouped: $(awk '$1 == "contiguous" {printf "c%s/%s/%s k%s | ", $2, $6, $7, $14} $1 == "decode" {printf "d%s/%s/%s %s %s%% | ", $2, $8, $9, $10, $13}' $OUT/g.txt)"
    timeout 120 ./build/moekit bench gemm --no-baseline --shapes $DENSE > $OUT/s.txt 2>&1
    echo "r$r $tag dense: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/s.txt)"
    moe_round $tag $r 1,8,1024,4096
    unset MOEKIT_JIT_DEFINES
  done
done
trace_masked "" masked:1:1024:4096:7168
echo "total $(( $(date +%s) - t0 )) s"
