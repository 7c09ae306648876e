# v20 device call 8: L2 -> SM read sectors, instructions and tensor activity at locked base clocks for
# 4096x4096x7168: cuBLASLt's block-scaled kernel, ours (m128n128s5, c1) and ours with 2-CTA B
# multicast (c2), to compare with v14's figures after v15-v20.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
MET=sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_requests_srcunit_tex_op_read.sum,sm__inst_executed.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
s=4096:4096:7168
./build/moekit bench gemm --shapes $s --reps 2 --config m128n128s5g8x132c2 --no-baseline > /dev/null 2>&1  # JIT warm-up
timeout 150 ncu --clock-control base --kernel-name regex:'nvjet' --launch-skip 2 --launch-count 1 --metrics $MET \
  ./build/moekit bench gemm --shapes $s --reps 2 --cooldown-ms 0 > $OUT/lt.txt 2>&1
echo "== cuBLASLt $s"; grep -E "^  [a-zA-Z_0-9]+.*\(|gmma|sectors|requests|inst_executed|duration|per_second|wavefronts" $OUT/lt.txt | head -10
for c in m128n128s5g8x132c1 m128n128s5g8x132c2; do
  timeout 150 ncu --clock-control base --kernel-name regex:moekit_fp8_gemm --launch-skip 2 --launch-count 1 --metrics $MET \
    ./build/moekit bench gemm --shapes $s --reps 2 --no-baseline --cooldown-ms 0 --config $c > $OUT/ours_$c.txt 2>&1
  echo "== ours $c"; grep -E "^  [a-zA-Z_0-9]+.*\(|gmma|sectors|requests|inst_executed|duration|per_second|wavefronts" $OUT/ours_$c.txt | head -10
done
