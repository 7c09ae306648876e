# Sourced by the device-call scripts: the runs and one-line summaries they share.
#   gemm_summary FILE        a bench gemm output as "MxNxK us TFLOPS vs_lt | ..." plus the M = 4096 geomean
#   moe_summary FILE         a bench moe output as "T=.. us | ..." plus the T = 16384 stage line
#   round_summaries          one line per $OUT/{gemm,grouped,moe}_r*.txt of an A/B (gemm_summary / moe_summary)
#   show_gemm / show_grouped / show_moe FILE   a bench output's table and summary lines
#   gemm_grouped_benches     bench gemm and bench grouped (both with cuBLASLt), summarized
#   main_benches             the same and the main job
#   halves_ab ROUND...       tail-halves A/B (MOEKIT_TAIL_HALVES=0 / 1) on the masked cases
#   sanitize                 memcheck over $MEMCHECK_FILTER and racecheck over $RACECHECK_FILTER (build/)
#   masked_round LABEL       bench grouped --no-baseline over $MASKED, one line "LABEL: rows us kKERN_US | ..."
#                            (MOEKIT_GROUPED_CONFIG=CFG masked_round LABEL: under a forced configuration)
#   trace_masked CFG CASE    one traced launch of the masked CASE (L:E:M:N:K) under CFG ("": the pick), its summary (v32)
#   final_check              main_benches, three masked_rounds of DeepGEMM's masked rows, one traced launch (v23, v24)
#   moe_round TAG ROUND TOKENS [ENV...]   deepseek-v3 layer (no baseline, no check) under ENV with ${BIN:-build/moekit}:
#                            one line of layer µs and GEMM1 stage µs per T (v28)
#   energy_round ENV TOKENS  deepseek-v3 layer under ENV (NAME=VALUE words) with --energy: layer µs, stage and
#                            energy lines per T (v28)
S4096=4096:2112:7168,4096:24576:1536,4096:32768:512,4096:7168:16384,4096:4096:7168,4096:7168:2048

gemm_summary() {
  echo "$(awk '$1 ~ /^[0-9]+$/ && NF > 8 {printf "%sx%sx%s %s %s %s | ", $1, $2, $3, $5, $6, $9}' $1) $(grep -o 'M = 4096: *[0-9.]*x' $1)"
}

moe_summary() {
  echo "$(awk '$1 ~ /^deepseek/ {printf "T=%s %s | ", $2, $5}' $1) $(grep -h '^# stages.*16384' $1 | sed 's/.*(us)://' | cut -c1-120)"
}

round_summaries() {
  echo "== bench gemm (us, TFLOPS, vs cuBLASLt fp8)"
  for f in $OUT/gemm_r*.txt; do echo "$(basename $f .txt): $(gemm_summary $f)"; done
  if ls $OUT/grouped_r*.txt > /dev/null 2>&1; then
    echo "== bench grouped (us, TFLOPS)"
    for f in $OUT/grouped_r*.txt; do
      echo "$(basename $f .txt): $(awk '($1 == "contiguous" || $1 == "masked" || $1 == "decode") {printf "%s%s/%s/%s %s %s | ", substr($1,1,1), $2, $6, $7, $8, $9}' $f)"
    done
  fi
  echo "== bench moe (T us)"
  for f in $OUT/moe_r*.txt; do echo "$(basename $f .txt): $(moe_summary $f)"; done
}

show_gemm() { grep -E "^ *M |^ *[0-9]+ |geomean|bandwidth" $1 | cut -c1-200; }
show_grouped() { grep -E "^layout|^(contiguous|masked|decode)|geomean" $1 | cut -c1-230; }
show_moe() { grep -v "^# moekit" $1 | grep -E "^deepseek|^# stages|^preset" | cut -c1-150; }

gemm_grouped_benches() {
  timeout 200 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
  show_gemm $OUT/bench_gemm.txt
  timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
  show_grouped $OUT/bench_grouped.txt
}

main_benches() {
  gemm_grouped_benches
  timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
  show_moe $OUT/bench_moe.txt
}

# halves_ab ROUND...: the masked cases with MOEKIT_TAIL_HALVES=0 then 1, once per ROUND (v20).
halves_ab() {
  local cases="--case masked:1:1024:7168:2048 --case masked:2:512:7168:2048 --case masked:4:256:7168:2048 --case masked:1:1024:4096:7168"
  for r in "$@"; do
    for h in 0 1; do
      MOEKIT_TAIL_HALVES=$h timeout 100 ./build/moekit bench grouped --no-baseline $cases > $OUT/ab_h${h}_r$r.txt 2>&1
      echo "halves=$h r$r: $(awk '$1 == "masked" {printf "%s/%s/%s us %s kern %s | ", $2, $6, $7, $8, $14}' $OUT/ab_h${h}_r$r.txt)"
    done
  done
}

# racecheck_run FILTER: racecheck over the GPU tests in FILTER, one summary line.
racecheck_run() {
  timeout ${RACECHECK_TIMEOUT:-250} compute-sanitizer --tool racecheck ./build/moekit_gpu_tests --gtest_filter="$1" > $OUT/racecheck.log 2>&1
  echo "racecheck rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/racecheck.log | tail -3 | tr '\n' ' ')"
}

sanitize() {
  local t=$(date +%s)
  timeout ${MEMCHECK_TIMEOUT:-280} compute-sanitizer --tool memcheck ./build/moekit_gpu_tests --gtest_filter="$MEMCHECK_FILTER" > $OUT/memcheck.log 2>&1
  echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | tail -3 | tr '\n' ' ')"
  racecheck_run "$RACECHECK_FILTER"
  echo "sanitizers took $(( $(date +%s) - t )) s"
}

# masked_round LABEL: the cases in $MASKED without baselines, one summary line (event-timed us, kernel-only us).
masked_round() {
  timeout 100 ./build/moekit bench grouped --no-baseline $MASKED > $OUT/m.txt 2>&1
  echo "$1: $(awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}' $OUT/m.txt)"
}

# trace_masked CFG CASE: one traced launch (MOEKIT_TRACE_GEMM) of masked CASE under MOEKIT_GROUPED_CONFIG=CFG.
trace_masked() {
  MOEKIT_GROUPED_CONFIG=$1 MOEKIT_TRACE_GEMM=masked timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case $2 2>&1 |
    grep -A4 "moekit trace" | tail -5 | cut -c1-500
}

# final_check: the main benches, three more rounds of DeepGEMM's masked rows alone (their spread between
# rounds) and one traced launch of 4 x 256 (7168, 2048).
final_check() {
  main_benches
  MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
  for r in 1 2 3; do masked_round "masked r$r"; done
  MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case masked:4:256:7168:2048 2>&1 | grep -A4 "moekit trace" | tail -5
}

# session_final [PROBE SHOW]: a session's final check after gpu_suite.sh — the sanitizers ($MEMCHECK_FILTER,
# $RACECHECK_FILTER, their timeouts), one run of build/PROBE shown through SHOW (e.g. "tail -19") when
# given, final_check and the call's total time (v25-v28).
session_final() {
  sanitize
  if [ -n "$1" ]; then
    (cd build && timeout 60 ./$1) > $OUT/probe.txt 2>&1
    $2 $OUT/probe.txt
  fi
  final_check
  echo "total $(( $(date +%s) - t0 )) s"
}

# moe_round TAG ROUND TOKENS [ENV...]: one A/B round of the deepseek-v3 layer under ENV (v28); output kept in
# $OUT/ab_TAG_rROUND.txt.
moe_round() {
  local tag=$1 r=$2 tok=$3
  shift 3
  env "$@" timeout 250 ${BIN:-./build/moekit} bench moe --preset deepseek-v3 --tokens $tok --no-baseline --no-check > $OUT/ab_${tag}_r$r.txt 2>&1
  echo "$tag r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/ab_${tag}_r$r.txt) g1: $(grep '# stages' $OUT/ab_${tag}_r$r.txt | sed 's/.*gemm1_swiglu \([0-9.]*\).*/\1/' | tr '\n' ' ')"
}

# energy_round ENV TOKENS: the deepseek-v3 layer under ENV (space-separated NAME=VALUE words) with `bench moe --energy` (v28).
energy_round() {
  env $1 timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens $2 --no-baseline --no-check --energy > $OUT/e.txt 2>&1
  echo "[$1] $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/e.txt)"
  grep -E '^# (energy|stages)' $OUT/e.txt | sed 's/^/    /; s/ (us)//' | cut -c1-170
}
