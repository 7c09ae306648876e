#!/bin/bash
# Device call (v14): what cuBLASLt's block-scaled FP8 kernel does on the dense shapes where it beats us
# (kernel name = its tile / cluster config, launch shape, registers, shared memory, SOL), next to ours,
# at locked base clocks. SHAPES overrides (M:N:K list).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
for s in ${SHAPES:-4096:7168:16384 4096:4096:7168}; do
  timeout 200 ncu --clock-control base --kernel-name regex:'nvjet|xmma|cutlass|sm90_' \
    --launch-count 3 --section SpeedOfLight --section LaunchStats --section Occupancy \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,sm__inst_executed.sum \
    ./build/moekit bench gemm --shapes $s --reps 1 > $OUT/lt_$s.txt 2>&1
  echo "== cuBLASLt $s (rc $?)"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|Compute \(SM\)|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Registers Per|Shared Memory Config|Dynamic Shared|Block Size|Grid Size|Cluster|gmma|sectors|inst_executed" $OUT/lt_$s.txt | head -60
  timeout 200 ncu --clock-control base --kernel-name regex:moekit_fp8_gemm --launch-skip 1 --launch-count 1 --section SpeedOfLight \
    --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,sm__inst_executed.sum \
    ./build/moekit bench gemm --shapes $s --reps 2 --no-baseline > $OUT/ours_$s.txt 2>&1
  echo "== moekit $s (rc $?)"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|SM Frequency|Compute \(SM\)|L2 Cache Throughput|DRAM Throughput|gmma|sectors|inst_executed" $OUT/ours_$s.txt | head -12
done
(cd $OUT && tar czf lt.tgz *.txt && rm -f *.txt)
