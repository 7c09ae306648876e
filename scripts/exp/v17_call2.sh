#!/bin/bash
# Device call 2 (v17): full GPU suite on the warp-cooperative scheduler + fast SwiGLU epilogue; T = 1 traces;
# A/B against the previous build; leave-one-out of the quantize pass and the gather variant at T <= 8.
source scripts/exp/gpu_suite.sh
for b in ./build_a/moekit ./build/moekit; do
  echo "== trace $b"
  MOEKIT_TRACE_GEMM=moe_gemm timeout 100 $b bench moe --no-check --no-baseline --tokens 1 --reps 3 2>&1 | grep -A2 "moekit trace" | tail -6 | grep -v "^  at"
done
ROUNDS=3 BENCH_TOKENS=1,2,8,64,256 bash scripts/exp/ab_bin.sh | grep -v stages
VARIANTS='-;MOEKIT_DIAG_SKIP=permute_quant;MOEKIT_GEMM1_GATHER=1' ROUNDS=2 BENCH_TOKENS=1,2,8 bash scripts/exp/ab_env.sh
ROUNDS=1 BENCH_TOKENS=1024,4096,16384 bash scripts/exp/ab_bin.sh
echo "total $(( $(date +%s) - t0 )) s"
