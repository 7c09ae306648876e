#!/bin/bash
# Device call: accumulation-chain probe (dense GEMM), then ncu of prefill GEMM1 / GEMM2 (T = 16384)
# and the dense 4096x7168x16384 GEMM. SKIP_NCU=1 skips the profiles.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
timeout 120 ./build/moekit_gpu_tests --gtest_filter='GemmFp8Probe.*' --gtest_also_run_disabled_tests > $OUT/probe.log 2>&1
grep -E '\[probe\]|PASSED|FAILED' $OUT/probe.log
echo "probe took $(( $(date +%s) - t0 )) s"
timeout 150 ./build/moekit bench moe --tokens 4096,16384 --no-check --no-baseline --reps 3 > $OUT/bench16k.txt 2>&1
grep -E '^deepseek|stages' $OUT/bench16k.txt | cut -c1-200
timeout 60 ./build/moekit bench gemm --shapes 4096:7168:16384,4096:4096:7168 --no-baseline --reps 10 > $OUT/bench_dense.txt 2>&1
grep -v '^#' $OUT/bench_dense.txt | head -6
echo "benches took $(( $(date +%s) - t0 )) s"
[ -n "$SKIP_NCU" ] && exit 0
SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats"
MET='--metrics regex:^sm__pipe_.*(tensor|fma|alu|fp16|shared).*cycles_active.avg.pct_of_peak_sustained_active$,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active.ratio$,regex:^l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed$,regex:^sm__cycles_active.avg$'
prof() {  # name regex, then the command
  local tag=$1 re=$2; shift 2
  timeout 150 ncu --clock-control none --kernel-name regex:$re --launch-count 1 $SEC $MET "$@" > $OUT/ncu_$tag.txt 2>&1
  echo "== $tag (rc $?)"
  grep -E 'Duration|Throughput|Pipe|Issue Slots|Executed Ipc|SM Busy|pct_of_peak|stalled_(long|barrier|wait|math|mio|lg|short|dispatch|no_inst|not_sel|selected|sleep|branch|membar|tex|imc|drain|misc)' $OUT/ncu_$tag.txt | grep -v '  0$' | head -60
  echo "ncu took $(( $(date +%s) - t0 )) s"
}
prof gemm1 moe_gemm1 ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 1
prof gemm2 fp8_gemm_contiguous ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 1
prof dense fp8_gemm_dense ./build/moekit bench gemm --shapes 4096:7168:16384 --no-baseline --reps 1
