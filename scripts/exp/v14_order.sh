#!/bin/bash
# Device call (v14): A/B of kernel compile-time switches (MOEKIT_JIT_DEFINES, e.g. the math warpgroups'
# issue order MOEKIT_WG_ORDER; MOEKIT_MBAR_SUSPEND_NS, an mbarrier suspend hint, existed only in the build of
# docs/runs/v14-ab-order-suspend-h100.txt and was removed). GPU suite on the default
# build, then the variants over bench gemm (M = 4096 shapes), bench grouped and bench moe (deepseek-v3),
# rounds interleaved. SKIP_TESTS=1 skips the suite; ROUNDS (2), MOE_TOKENS, GEMM_SHAPES and VARIANTS
# (';'-separated, each a space-separated list of env assignments, "-" = defaults) override;
# NO_GROUPED=1 skips bench grouped.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
IFS=';' read -ra VS <<< "${VARIANTS:-MOEKIT_JIT_DEFINES=MOEKIT_WG_ORDER=0;-}"
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in "${VS[@]}"; do
    if [ "$v" = "-" ]; then envs=(MOEKIT_AB_DEFAULT=1); else read -ra envs <<< "$v"; fi
    tag=$(echo "$v" | sed 's/MOEKIT_JIT_DEFINES=//; s/MOEKIT_//g; s/[ =,]/_/g')
    env "${envs[@]}" timeout 200 ./build/moekit bench gemm --shapes ${GEMM_SHAPES:-$S4096} > $OUT/gemm_r${r}_$tag.txt 2>&1
    [ -z "$NO_GROUPED" ] && env "${envs[@]}" timeout 200 ./build/moekit bench grouped > $OUT/grouped_r${r}_$tag.txt 2>&1
    env "${envs[@]}" timeout 250 ./build/moekit bench moe --preset deepseek-v3 --no-baseline --no-check \
      --tokens ${MOE_TOKENS:-1,64,1024,4096,16384} > $OUT/moe_r${r}_$tag.txt 2>&1
    echo "round $r [$v] done at $(( $(date +%s) - t0 )) s"
  done
done
round_summaries
echo "total $(( $(date +%s) - t0 )) s"
