#!/usr/bin/env bash
# One device-machine call: facts, GPU tests, sanitizers, benchmarks. Run from the repository root
# with a build folder carried in `build/`. Writes logs under $OUT (if set) and prints a summary.
# Usage: scripts/gpu_check.sh [tests|sanitize|bench|moe|moebench|all]...
# (moe: the MoE sanitizer runs; moebench: the main job, deepseek-v3 with the baseline, then every preset)
set -uo pipefail
OUT=${OUT:-/tmp/moekit-out}
mkdir -p "$OUT"
export MOEKIT_CACHE_DIR=${MOEKIT_CACHE_DIR:-$PWD/.jitcache}
B=./build
what=${*:-all}
has() { [[ " $what " == *" $1 "* || " $what " == *" all "* ]]; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
$B/moekit info
summary=()
if has tests; then
  timeout 300 $B/moekit_gpu_tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^\[  (FAILED|PASSED) |^\[==========\]|Failure|error" | head -60
  summary+=("gpu tests: $(grep -E '^\[  PASSED|^\[  FAILED' "$OUT/gpu_tests.log" | head -2 | tr '\n' ' ')")
fi
if has bench; then
  timeout 200 $B/moekit bench gemm 2>&1 | tee "$OUT/bench_gemm.txt"
  timeout 60 $B/moekit bench quant 2>&1 | tee "$OUT/bench_quant.txt"
  timeout 240 $B/moekit bench grouped 2>&1 | tee "$OUT/bench_grouped.txt"
fi
if has sanitize; then
  F=${MEMCHECK_FILTER:-'GemmFp8.EveryTileShape:GemmFp8.CudaGraphReplay:ActQuant.SpecialValues:WeightQuant.*:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts:GroupedGemmContiguous.CudaGraphReplayWithDeviceOffsets'}
  timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool memcheck $B/moekit_gpu_tests --gtest_filter="$F" > "$OUT/memcheck.log" 2>&1
  summary+=("memcheck ($F): $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tail -2 | tr '\n' ' ')")
  R=${RACECHECK_FILTER:-'GemmFp8.CudaGraphReplay:ActQuant.SpecialValues:GroupedGemmMasked.CudaGraphReplayFollowsDeviceCounts'}
  timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool racecheck $B/moekit_gpu_tests --gtest_filter="$R" > "$OUT/racecheck.log" 2>&1
  summary+=("racecheck ($R): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED' "$OUT/racecheck.log" | tail -2 | tr '\n' ' ')")
fi
if has moe; then
  # The MoE layer: its sanitizer runs and the main job (bench moe, deepseek-v3, then every preset).
  M='PermuteQuantizeByToken.*:MoeSortGpu.CudaGraphSingleCtaPathAndByToken:MoeGemm1Swiglu.*:MoeGemm2Scatter.*:MoeLayer.GraphReplayWithNewLogitsMatchesEager:MoeLayer.DuplicatesMinusOneAndInvalidIds:MoeLayer.NanRowsStayLocal:MoeLayer.AllTokensOnOneExpertAndEmptyExperts'
  timeout 240 compute-sanitizer --tool memcheck $B/moekit_gpu_tests --gtest_filter="$M" > "$OUT/memcheck_moe.log" 2>&1
  summary+=("memcheck (moe): $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck_moe.log" | tail -2 | tr '\n' ' ')")
  timeout 200 compute-sanitizer --tool racecheck $B/moekit_gpu_tests --gtest_filter='MoeGemm1Swiglu.*:MoeGemm2Scatter.*' > "$OUT/racecheck_moe.log" 2>&1
  summary+=("racecheck (moe): $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$OUT/racecheck_moe.log" | tail -2 | tr '\n' ' ')")
fi
if has moebench; then
  timeout 250 $B/moekit bench moe --preset deepseek-v3 2>&1 | tee "$OUT/bench_moe.txt"
  timeout 250 $B/moekit bench moe --preset all --tokens 1,64,1024,16384 --no-baseline 2>&1 | tee "$OUT/bench_moe_all.txt"
fi
printf '%s\n' "${summary[@]}"
