# Sourced by the device-call scripts: the runs and one-line summaries they share.
#   gemm_summary FILE        a bench gemm output as "MxNxK us TFLOPS vs_lt | ..." plus the M = 4096 geomean
#   moe_summary FILE         a bench moe output as "T=.. us | ..." plus the T = 16384 stage line
#   round_summaries          one line per $OUT/{gemm,grouped,moe}_r*.txt of an A/B (gemm_summary / moe_summary)
#   main_benches             bench gemm, bench grouped (both with cuBLASLt) and the main job, summarized
#   sanitize                 memcheck over $MEMCHECK_FILTER and racecheck over $RACECHECK_FILTER (build/)
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

main_benches() {
  timeout 200 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
  grep -E "^ *[0-9]+ |geomean|bandwidth" $OUT/bench_gemm.txt | cut -c1-150
  timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
  grep -E "^(contiguous|masked|decode)|geomean" $OUT/bench_grouped.txt | cut -c1-150
  timeout 200 ./build/moekit bench moe --preset deepseek-v3 > $OUT/bench_moe.txt 2>&1
  grep -v "^# moekit" $OUT/bench_moe.txt | grep -E "^deepseek|^# stages|^preset" | cut -c1-150
}

sanitize() {
  local t=$(date +%s)
  timeout ${MEMCHECK_TIMEOUT:-280} compute-sanitizer --tool memcheck ./build/moekit_gpu_tests --gtest_filter="$MEMCHECK_FILTER" > $OUT/memcheck.log 2>&1
  echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/memcheck.log | tail -3 | tr '\n' ' ')"
  timeout ${RACECHECK_TIMEOUT:-250} compute-sanitizer --tool racecheck ./build/moekit_gpu_tests --gtest_filter="$RACECHECK_FILTER" > $OUT/racecheck.log 2>&1
  echo "racecheck rc=$?: $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' $OUT/racecheck.log | tail -3 | tr '\n' ' ')"
  echo "sanitizers took $(( $(date +%s) - t )) s"
}
