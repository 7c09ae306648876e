#!/bin/bash
# v16: prefill GEMM1 variants (deepseek-v3, T = 4096 / 16384): pairs (c2) vs dynamic single CTAs (c1),
# chains of 64 vs 128; VARIANTS (';'-separated env lists, "-" = defaults) replaces the set. Rounds
# interleave the variants. Then a per-CTA trace of the default GEMM1 at T = 16384 (TRACE_ENV: its env).
# (docs/runs/v16-gemm1-variants-h100.txt also has issue-order variants, MOEKIT_WG_ORDER=2/3/4: a
# compile-time patch applied for those device calls only, described in perf-notes v16.)
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
IFS=';' read -ra VARIANTS <<< "${VARIANTS:--;MOEKIT_MOE_GEMM1_CONFIG=m64n256s5g8x132c1;MOEKIT_GEMM1_PROMOTE_K=128}"
run() {  # $1 = variant, $2 = tag
  local envs=(); [ "$1" != "-" ] && read -ra envs <<< "$1"
  env "${envs[@]}" timeout 200 ./build/moekit bench moe --no-baseline --no-check --reps ${REPS:-15} --tokens ${TOK:-4096,16384} > $OUT/run.txt 2>&1
  echo "$2 [$1] $(awk '$1 ~ /^deepseek/ {printf "T=%s %s | ", $2, $5}' $OUT/run.txt) $(grep -h '^# stages' $OUT/run.txt | sed 's/.*T=\([0-9]*\) (us):/T\1:/; s/route[^,]*, //; s/sort[^,]*, //' | grep -o 'T[0-9]*:.*gemm2_[a-z]* [0-9.]*' | tr '\n' ' ')"
  grep -iE "error|fail" $OUT/run.txt | head -3
}
# compile every variant's kernels first (in parallel: NVRTC is single-threaded)
for v in "${VARIANTS[@]}"; do (envs=(); [ "$v" != "-" ] && read -ra envs <<< "$v"; env "${envs[@]}" ./build/moekit bench moe --no-baseline --no-check --reps 1 --tokens 4096 > /dev/null 2>&1) & done; wait
echo "compiled at $(( $(date +%s) - t0 )) s"
for r in 1 2; do for v in "${VARIANTS[@]}"; do run "$v" r$r; done; done
env MOEKIT_TRACE_GEMM=moe_gemm1 ${TRACE_ENV:-} timeout 100 ./build/moekit bench moe --no-baseline --no-check --reps 1 --tokens 16384 2>&1 | grep -A2 "moekit trace" | tail -3
echo "total $(( $(date +%s) - t0 )) s"
