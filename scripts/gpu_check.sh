#!/usr/bin/env bash
# One device-machine call: facts, GPU tests, sanitizers, benchmarks. Run from the repository root
# with a build folder in `build/` (or $B). Writes logs under $OUT (if set) and prints a summary.
# Usage: scripts/gpu_check.sh [tests|sanitize|bench|moe|moebench|ab|all]...
# (moe: the MoE sanitizer runs; moebench: the main job, deepseek-v3 with the baseline, then every preset;
#  ab, not part of all: kernel-only A/B of MOEKIT_JIT_DEFINES variants, below)
set -uo pipefail
OUT=${OUT:-/tmp/moekit-out}
mkdir -p "$OUT"
export MOEKIT_CACHE_DIR=${MOEKIT_CACHE_DIR:-$PWD/.jitcache}
B=${B:-./build}  # the build folder (B=./build-diag for ab)
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
if [[ " $what " == *" ab "* ]]; then
  # Kernel-only µs of DeepGEMM's dense shapes and grouped cases under each MOEKIT_JIT_DEFINES variant
  # (a -DMOEKIT_DIAGNOSTICS=ON build in $B; the switches: docs/environment.md). AB_VARIANTS: the
  # variants, space-separated, "-" = none (default: none, each K-loop experiment, both); AB_ROUNDS
  # interleaved rounds (default 2); AB_SHAPES / AB_CASES override the dense shapes / grouped cases;
  # AB_CONFIG forces one dense configuration; AB_MOE "PRESET:T1,T2" (default deepseek-v3:4096,16384,
  # "-" for none) adds the MoE layer (whole layer us). Correctness: against cuBLASLt in round 1, and
  # the layer's rel_l2 against its float64 reference.
  variants=${AB_VARIANTS:-"- MOEKIT_KLOOP_EARLY_WAIT=1 MOEKIT_K_ROTATE=1 MOEKIT_KLOOP_EARLY_WAIT=1,MOEKIT_K_ROTATE=1"}
  shapes=${AB_SHAPES:-64:2112:7168,64:32768:512,128:2112:7168,128:32768:512,128:4096:7168,4096:2112:7168,4096:24576:1536,4096:32768:512,4096:7168:16384,4096:4096:7168,4096:7168:2048}
  cases=${AB_CASES:-"contiguous:4:8192:4096:7168 contiguous:4:8192:7168:2048 masked:1:1024:4096:7168 masked:4:256:7168:2048"}
  case_args=(); for c in $cases; do case_args+=(--case "$c"); done
  cfg=(); [[ -n ${AB_CONFIG:-} ]] && cfg=(--config "$AB_CONFIG")
  : > "$OUT/ab.tsv"
  for round in $(seq 1 "${AB_ROUNDS:-2}"); do
    for v in $variants; do
      d=$v; [[ $v == - ]] && d=""
      base=(--no-baseline); ((round == 1)) && base=()
      MOEKIT_JIT_DEFINES=$d timeout 300 $B/moekit bench gemm --csv --data normal --reps 20 --cooldown-ms 300 \
        "${base[@]}" "${cfg[@]}" --shapes "$shapes" 2>/dev/null |
        awk -F, -v v="$v" -v r="$round" 'NR > 1 { print v "\t" r "\t" $1 "x" $2 "x" $3 "\t" $4 "\t" $8 "\t" $15 }' >> "$OUT/ab.tsv"
      MOEKIT_JIT_DEFINES=$d timeout 300 $B/moekit bench grouped --csv --data normal --reps 20 --cooldown-ms 300 \
        --no-baseline "${case_args[@]}" 2>/dev/null |
        awk -F, -v v="$v" -v r="$round" 'NR > 1 { print v "\t" r "\t" $1 " " $2 "x" $3 " (" $6 "," $7 ")\t-\t" $14 "\t-" }' >> "$OUT/ab.tsv"
      moe=${AB_MOE:-deepseek-v3:4096,16384}
      if [[ $moe != - ]]; then
        MOEKIT_JIT_DEFINES=$d timeout 300 $B/moekit bench moe --format csv --preset "${moe%%:*}" --tokens "${moe#*:}" \
          --no-baseline --reps 5 --cooldown-ms 300 2>/dev/null |
          awk -F, -v v="$v" -v r="$round" 'NR > 1 { print v "\t" r "\tlayer " $1 " T=" $2 "\t-\t" $7 "\t" $4 }' >> "$OUT/ab.tsv"
      fi
    done
  done
  # One row per case: kernel-only µs of each variant, the rounds' values side by side.
  awk -F'\t' '{ k = $3; if (!(k in seen)) { seen[k] = 1; order[++n] = k } t[k, $1] = t[k, $1] (t[k, $1] == "" ? "" : "/") $5
                 if ($6 != "" && $6 != "-") err[k, $1] = $6; if (!($1 in vs)) { vs[$1] = 1; vo[++m] = $1 } }
       END { printf "%-34s", "case (kernel-only us, layer us; rel_l2)"; for (j = 1; j <= m; ++j) printf "  %s", vo[j]; print ""
             for (i = 1; i <= n; ++i) { printf "%-34s", order[i]
               for (j = 1; j <= m; ++j) printf "  %s%s", t[order[i], vo[j]], ((order[i], vo[j]) in err ? " (" err[order[i], vo[j]] ")" : "")
               print "" } }' "$OUT/ab.tsv" | tee "$OUT/ab_table.txt"
fi
printf '%s\n' "${summary[@]}"
