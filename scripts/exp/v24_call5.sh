# v24 device call 5: the deferred epilogue (a tile's epilogue under the next tile's first two K
# blocks, pipelined 128- and 64-row tiles; MOEKIT_EPI_OVERLAP, default 1). GPU suite with it, then
# an A/B (MOEKIT_JIT_DEFINES=MOEKIT_EPI_OVERLAP=0 / 1) in two interleaved rounds: the masked rows,
# bench gemm (M = 4096 and small M) and the main job at T = 1 ... 4096, no baselines.
# (A record of what ran: the switch it sets was removed after the call, as it measured slower; perf-notes v24.)
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168 --case masked:2:512:4096:7168 --case masked:4:256:4096:7168 --case masked:32:64:4096:7168 --case masked:256:16:7168:2048"
for r in 1 2; do
  for v in 0 1; do
    export MOEKIT_JIT_DEFINES=MOEKIT_EPI_OVERLAP=$v
    masked_round "overlap=$v r$r masked"
    timeout 120 ./build/moekit bench gemm --no-baseline > $OUT/gemm_o${v}_r$r.txt 2>&1
    echo "overlap=$v r$r gemm: $(awk '$1 ~ /^[0-9]+$/ && NF > 6 {printf "%sx%sx%s %s | ", $1,$2,$3,$5}' $OUT/gemm_o${v}_r$r.txt)"
    timeout 150 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --no-check --tokens 1,64,256,1024,4096 > $OUT/moe.txt 2>&1
    echo "overlap=$v r$r moe: $(moe_summary $OUT/moe.txt)"
  done
done
unset MOEKIT_JIT_DEFINES
echo "total $(( $(date +%s) - t0 )) s"
