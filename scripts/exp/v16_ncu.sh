#!/bin/bash
# Device call (v16): ncu at locked base clocks, the same problem (256 experts x 512 rows, N = 4096,
# K = 7168) three ways: the MoE GEMM1 (deepseek-v3 T = 16384, chains of 64 and of 128) and the plain
# contiguous grouped GEMM (bf16 out, bench grouped --case).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
MET='--metrics regex:^sm__pipe_.*(tensor|fma|alu|shared).*cycles_active.avg.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active.ratio$,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_hit_rate.pct,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed'
prof() {  # tag, kernel regex, env, command...
  local tag=$1 re=$2 envs=$3; shift 3
  env $envs timeout 200 ncu --clock-control base --kernel-name regex:$re --launch-skip 1 --launch-count 1 $SEC $MET "$@" > $OUT/ncu_$tag.txt 2>&1
  echo "== $tag (rc $?, $(( $(date +%s) - t0 )) s)"
  grep -E 'Duration|SM Frequency|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|pct_of_peak|pct |inst_executed|bytes_read|sectors_srcunit|stalled_(long|barrier|wait|math|mio|lg|short|dispatch|no_inst|not_sel|selected|sleep|branch|membar|gmma)' $OUT/ncu_$tag.txt | grep -v '  0$' | awk '{$1=$1};1' | cut -c1-110 | head -40
}
prof gemm1_p64 moe_gemm1 "MOEKIT_X=0" ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 1
prof gemm1_p128 moe_gemm1 "MOEKIT_GEMM1_PROMOTE_K=128" ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 1
prof grouped fp8_gemm_contiguous "MOEKIT_X=0" ./build/moekit bench grouped --case contiguous:256:512:4096:7168 --no-baseline --reps 2
(cd $OUT && tar czf ncu.tgz *.txt && rm -f *.txt)
