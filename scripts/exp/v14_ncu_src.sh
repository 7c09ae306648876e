#!/bin/bash
# Device call (v14): ncu with per-instruction warp-state sampling (SourceCounters) of the dense GEMM
# 4096x7168x16384 and the prefill MoE GEMM1 / GEMM2 (deepseek-v3, T = 4096), at locked base clocks.
# The SASS-level CSV (--page source) lands in $OUT/ncu_src.tgz for offline aggregation (scripts/exp/sass_agg.py).
# WHAT: which of dense / gemm1 / gemm2 (default: all three); WG0=1 adds gemm1 and dense compiled without the
# math warpgroups' issue order (MOEKIT_WG_ORDER=0). GEMM2 at prefill sizes is the plain contiguous GEMM ("rows").
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
prof() {  # name, kernel regex, skip, command... (environment passes through)
  local name=$1 re=$2 skip=$3; shift 3
  timeout 240 ncu --clock-control base --set full --import-source no --kernel-name regex:$re --launch-skip $skip \
    --launch-count 1 -o $OUT/$name -f "$@" > $OUT/$name.log 2>&1
  echo "== $name (rc $?, $(( $(date +%s) - t0 )) s)"
  ncu -i $OUT/$name.ncu-rep --page source --csv --print-source sass > $OUT/${name}_sass.csv 2> $OUT/${name}_sass.err
  echo "sass csv: $(wc -l < $OUT/${name}_sass.csv) lines $(head -c 300 $OUT/${name}_sass.err)"
  ncu -i $OUT/$name.ncu-rep --page details --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
    > $OUT/${name}_details.txt 2>&1
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots|Stall|Warp Cycles" $OUT/${name}_details.txt | head -12
}
for what in ${WHAT:-dense gemm1 gemm2}; do
  case $what in
    dense*) prof $what fp8_gemm_dense 1 ./build/moekit bench gemm --shapes ${SHAPE:-4096:7168:16384} --no-baseline --reps 2 ;;
    gemm1*) prof $what moe_gemm1 1 ./build/moekit bench moe --tokens ${TOKENS:-4096} --no-check --no-baseline --reps 1 ;;
    gemm2*) prof $what "moe_gemm2|fp8_gemm_contiguous" 1 ./build/moekit bench moe --tokens ${TOKENS:-4096} --no-check --no-baseline --reps 1 ;;
  esac
done
if [ -n "$WG0" ]; then
  MOEKIT_WG_ORDER=0 prof gemm1_o0 moe_gemm1 1 ./build/moekit bench moe --tokens ${TOKENS:-4096} --no-check --no-baseline --reps 1
  MOEKIT_WG_ORDER=0 prof dense_o0 fp8_gemm_dense 1 ./build/moekit bench gemm --shapes ${SHAPE:-4096:7168:16384} --no-baseline --reps 2
fi
# The device tool returns a few files only: keep the CSVs and summaries in one archive.
(cd $OUT && tar czf ncu_src.tgz *_sass.csv *_details.txt *.log && rm -f *.ncu-rep *_sass.csv *_sass.err *_details.txt *.log)
ls -la $OUT | head -20
echo "total $(( $(date +%s) - t0 )) s"
