#!/bin/bash
# Device call (v18): is GEMM1's prefill time power or cycles? (1) ncu at locked base clocks, GEMM1 of
# deepseek-v3 T = 16384 with the diagnostic variants; (2) at default clocks, nvidia-smi sampling (SM clock,
# power) during 4 s of back-to-back T = 16384 layers per variant.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
MET='--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum'
VARS=("MOEKIT_X=0" "MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1" "MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_PROMOTE=1" "MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_PROMOTE=1,MOEKIT_DIAG_NO_LOADS=1" "MOEKIT_JIT_DEFINES=MOEKIT_CHAIN_PIPE=1" "MOEKIT_GEMM1_PROMOTE_K=128")
for v in "${VARS[@]}"; do
  env $v timeout 120 ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 3 > /dev/null 2>&1  # JIT warm-up
  env $v timeout 200 ncu --clock-control base --kernel-name regex:moe_gemm1 --launch-skip 1 --launch-count 1 $MET ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 1 > $OUT/ncu.txt 2>&1
  echo "ncu [$v] $(grep -E 'gmma_cycles|inst_executed|per_second|duration|sectors_srcunit|dram__bytes' $OUT/ncu.txt | awk '{printf "%s=%s ", $1, $NF}' | sed 's/sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active/tensor%/;s/smsp__inst_executed.sum/inst/;s/sm__cycles_elapsed.avg.per_second/clk/;s/gpu__time_duration.sum/dur/;s/lts__t_sectors_srcunit_tex_op_read.sum/l2sec/;s/dram__bytes_read.sum/dram/')"
done
echo "ncu part $(( $(date +%s) - t0 )) s"
for v in "${VARS[@]}"; do
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 > $OUT/smi.txt &
  pid=$!
  env $v timeout 120 ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 200 > $OUT/b.txt 2>&1
  kill $pid; wait $pid 2>/dev/null
  echo "clk [$v] $(awk -F', ' '$2 > 300 {n++; c += $1; p += $2} END {printf "samples %d  sm %.0f MHz  power %.0f W", n, c/n, p/n}' $OUT/smi.txt) | $(grep -h '^# stages' $OUT/b.txt | sed 's/.*gemm1_swiglu \([0-9.]*\), gemm2_rows \([0-9.]*\).*/g1 \1 g2 \2/')"
done
echo "total $(( $(date +%s) - t0 )) s"
