#!/bin/bash
# Device call: MoE sanitizers on the v10 build, then a GEMM2 tile-width A/B at T = 1, 2 (env override).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
source scripts/exp/bench_lib.sh
MEMCHECK_FILTER='PermuteQuantizeByToken.*:MoeSortGpu.CudaGraphSingleCtaPathAndByToken:MoeGemm1Swiglu.*:MoeGemm2Scatter.*:MoeLayer.GraphReplayWithNewLogitsMatchesEager:MoeLayer.DuplicatesMinusOneAndInvalidIds:MoeLayer.NanRowsStayLocal:MoeLayer.AllTokensOnOneExpertAndEmptyExperts'
RACECHECK_FILTER='MoeGemm1Swiglu.*:MoeGemm2Scatter.*'
MEMCHECK_TIMEOUT=260 RACECHECK_TIMEOUT=200 sanitize
VARIANTS='-;MOEKIT_MOE_GEMM2_CONFIG=m64n128s8g8x132c1;MOEKIT_MOE_GEMM2_CONFIG=m64n96s10g8x132c1;MOEKIT_MOE_GEMM2_CONFIG=m64n64s10g8x132c1' ROUNDS=3 BENCH_TOKENS=1,2 scripts/exp/ab_env.sh > $OUT/ab_g2.txt
awk '/^r[0-9]/{v=$2; for(i=3;i<=NF;i++) if ($i ~ /^deepseek/) {T=$(i+1); us=$(i+4)}; key=v" T="T; s[key]=s[key]" "us} END{for(k in s) print k": "s[k]}' $OUT/ab_g2.txt | sort
echo "total $(( $(date +%s) - t0 )) s"
