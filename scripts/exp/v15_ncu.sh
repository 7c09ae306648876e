#!/bin/bash
# Device call (v15): ncu at locked base clocks of the prefill MoE GEMMs (deepseek-v3, T = TOKENS, 4096),
# previous binary (build_prev) vs this one (build), so that power capping does not enter the comparison.
# KERNEL (regex, default moe_gemm1) picks the kernel.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
T=${TOKENS:-4096}
t0=$(date +%s)
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats"
MET='--metrics regex:^sm__pipe_.*(tensor|fma|alu|uniform).*cycles_active.avg.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active.ratio$,regex:^sm__cycles_active.avg$,smsp__inst_executed.sum'
for bin in ${BINS:-build_prev/moekit build/moekit}; do
  for k in ${KERNEL:-moe_gemm1}; do
    tag=$(echo $bin | cut -d/ -f1)_$k
    timeout 200 ncu --clock-control base --kernel-name regex:$k --launch-skip 1 --launch-count 1 \
      $SEC $MET ./$bin bench moe --tokens $T --no-check --no-baseline --reps 1 > $OUT/ncu_$tag.txt 2>&1
    echo "== $tag (rc $?)"
    grep -E '^  [a-z_0-9]+.*moe_gemm|Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc A|pct_of_peak|inst_executed|stalled_(long|barrier|wait|math|mio|lg|short|dispatch|no_inst|not_sel|selected|sleep|branch|membar)' $OUT/ncu_$tag.txt | grep -v '  0$' | awk '{$1=$1};1' | cut -c1-110 | head -40
  done
  echo "ncu took $(( $(date +%s) - t0 )) s"
done
(cd $OUT && tar czf ncu.tgz *.txt && rm -f *.txt)
