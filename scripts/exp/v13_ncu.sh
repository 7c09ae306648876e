#!/bin/bash
# Device call (v13): ncu of the prefill GEMM1, permuted (TMA) vs gathered (cp.async) A, deepseek-v3
# T = 4096, at locked base clocks (--clock-control base) so that power capping does not enter the
# comparison. TOKENS overrides T.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
T=${TOKENS:-4096}
t0=$(date +%s)
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
MET='--metrics regex:^sm__pipe_.*(tensor|fma|alu|shared).*cycles_active.avg.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active.ratio$,regex:^l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed$,regex:^sm__cycles_active.avg$,regex:^lts__t_sectors_srcunit_tex_op_read.sum$,regex:^dram__bytes_read.sum$'
for g in 0 1; do
  MOEKIT_GEMM1_GATHER=$g timeout 200 ncu --clock-control base --kernel-name regex:moe_gemm1 --launch-skip 1 --launch-count 1 \
    $SEC $MET ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps 1 > $OUT/ncu_g$g.txt 2>&1
  echo "== gather=$g (rc $?)"
  grep -E '^  [a-z_]+.*moe_gemm1|Duration|SM Frequency|Throughput|Pipe|Issue Slots|Executed Ipc|pct_of_peak|sectors|dram__bytes|stalled_(long|barrier|wait|math|mio|lg|short|dispatch|no_inst|not_sel|selected|sleep|branch|membar|tex|imc|drain|misc)' $OUT/ncu_g$g.txt | grep -v '  0$' | head -50
  echo "ncu took $(( $(date +%s) - t0 )) s"
done
