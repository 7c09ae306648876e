# v23 device call 2: first-tile L2 prefetch and the exit's read-only store wait (compile-time
# switches, A/B through MOEKIT_JIT_DEFINES) and B streaming ahead of the loads (MOEKIT_B_PREFETCH),
# on bench grouped (DeepGEMM's rows, decode-like masked) and the dense M = 4096 shapes. Interleaved
# rounds; the GEMM tests first.
# (A record of what ran: the switches it sets were removed after the call, as the measurements were negative; perf-notes v23.)
GTEST_FILTER='GemmFp8*:Grouped*:Masked*:Contiguous*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
OLD="MOEKIT_FIRST_TILE_PREFETCH=0,MOEKIT_EXIT_WAIT_READ=0"
run_variant() {  # NAME ROUND ENV...
  local name=$1 r=$2; shift 2
  env "$@" timeout 150 ./build/moekit bench grouped --no-baseline --cooldown-ms 0 > $OUT/g_${name}_r$r.txt 2>&1
  echo "$name r$r grouped: $(awk '($1 == "contiguous" || $1 == "masked" || $1 == "decode") {printf "%s%s/%s/%s %s k%s | ", substr($1,1,1), $2, $6, $7, $8, $14}' $OUT/g_${name}_r$r.txt)"
  echo "   $(grep -E 'geomean.*DeepGEMM' $OUT/g_${name}_r$r.txt | sed 's/geomean of //' | tr '\n' ' ')"
  env "$@" timeout 100 ./build/moekit bench gemm --no-baseline --cooldown-ms 0 --shapes $S4096,1024:4096:7168,1024:7168:2048,64:4096:7168,64:2112:7168,128:7168:2048,1:4096:7168 > $OUT/d_${name}_r$r.txt 2>&1
  echo "$name r$r gemm: $(awk '$1 ~ /^[0-9]+$/ && NF > 6 {printf "%sx%sx%s %s | ", $1, $2, $3, $5}' $OUT/d_${name}_r$r.txt)"
}
for r in 1 2; do
  run_variant old $r MOEKIT_JIT_DEFINES=$OLD
  run_variant new $r MOEKIT_NOTHING=1
  run_variant pfonly $r MOEKIT_JIT_DEFINES=MOEKIT_EXIT_WAIT_READ=0
  run_variant bpf4 $r MOEKIT_B_PREFETCH=4
  run_variant bpf8 $r MOEKIT_B_PREFETCH=8
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
echo "total $(( $(date +%s) - t0 )) s"
