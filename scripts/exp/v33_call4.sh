# v33 device call 4: MOEKIT_SB_PREFETCH 0 / 2 / 3 (none / first tile all lines + later tiles past the first / first
# tile only) on DeepGEMM's masked rows, the decode-like cases, dense, contiguous and the MoE layer, two rounds each.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
DENSE=4096:7168:16384,4096:4096:7168,4096:7168:2048,1024:4096:7168,1024:7168:2048,128:24576:1536,64:7168:2048,2048:2112:7168
for r in 1 2; do
  for sb in 0 2 3; do
    export MOEKIT_JIT_DEFINES=MOEKIT_SB_PREFETCH=$sb
    masked_round "r$r sb=$sb"
    timeout 150 ./build/moekit bench grouped --no-baseline > $OUT/g.txt 2>&1
    echo "r$r sb=$sb grouped: $(awk '$1 == "contiguous" {printf "c%s/%s/%s k%s | ", $2, $6, $7, $14} $1 == "decode" {printf "d%s/%s/%s %s %s%% | ", $2, $8, $9, $10, $13}' $OUT/g.txt)"
    timeout 120 ./build/moekit bench gemm --no-baseline --shapes $DENSE > $OUT/s.txt 2>&1
    echo "r$r sb=$sb dense: $(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/s.txt)"
    moe_round sb$sb $r 1,8,64,1024,4096
    unset MOEKIT_JIT_DEFINES
  done
done
echo "total $(( $(date +%s) - t0 )) s"
