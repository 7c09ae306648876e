# v28 device call 3: is the GEMM1 epilogue's cost cycles or power? deepseek-v3 GEMM1 with the default
# epilogue, without it (MOEKIT_DIAG_NO_EPILOGUE, results wrong) and deferred (h handed over, 4 stages)
# or the default with 4 stages: (1) ncu at locked base clocks, one GEMM1 launch at T = 4096 and 16384;
# (2) default clocks, nvidia-smi every 50 ms over back-to-back layers (SM clock, power).
# MOEKIT_GEMM1_DEFERRED=h: the intermediate deferred form of call 2 (not kept; see v28_call2.sh).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
MET='--metrics smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active'
VARS=("MOEKIT_X=0" "MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_EPILOGUE=1" "MOEKIT_GEMM1_DEFERRED=h" "MOEKIT_MOE_GEMM1_CONFIG=m64n256s4g8x132c2")
for T in 4096 16384; do
  for v in "${VARS[@]}"; do
    env $v timeout 120 ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps 2 > /dev/null 2>&1  # JIT warm-up
    env $v timeout 200 ncu --clock-control base --kernel-name regex:moe_gemm1 --launch-skip 1 --launch-count 1 $MET ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps 1 > $OUT/ncu.txt 2>&1
    echo "ncu T=$T [$v] $(grep -E 'inst_executed|per_second|duration|gmma' $OUT/ncu.txt | awk '{printf "%s=%s ", $1, $NF}' | sed 's/smsp__inst_executed.sum/inst/;s/sm__cycles_elapsed.avg.per_second/clk/;s/gpu__time_duration.sum/dur/;s/sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active/tensor%/')"
  done
done
echo "ncu part $(( $(date +%s) - t0 )) s"
for T in 4096 16384; do
  reps=$(( T == 4096 ? 300 : 100 ))
  for v in "${VARS[@]}"; do
    nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 > $OUT/smi.txt &
    pid=$!
    env $v timeout 150 ./build/moekit bench moe --tokens $T --no-check --no-baseline --reps $reps > $OUT/b.txt 2>&1
    kill $pid; wait $pid 2>/dev/null
    echo "clk T=$T [$v] $(awk -F', ' '$2 > 300 {n++; c += $1; p += $2} END {printf "samples %d  sm %.0f MHz  power %.0f W", n, c/n, p/n}' $OUT/smi.txt) | $(grep -h '^# stages' $OUT/b.txt | sed 's/.*gemm1_swiglu \([0-9.]*\), gemm2_rows \([0-9.]*\).*/g1 \1 g2 \2/') | layer $(awk '$1 == "deepseek-v3" {print $5}' $OUT/b.txt)"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
