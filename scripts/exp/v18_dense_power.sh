#!/bin/bash
# Device call (v18): the dense GEMM 4096x7168x16384 and the contiguous grouped 4x8192 (4096, 7168) at
# default clocks with nvidia-smi sampling (SM clock, power) over ~2 s of back-to-back launches, and at
# locked base clocks (ncu duration): c1 vs c2 (B multicast) vs no loads (diagnostic, wrong results).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
run() {  # tag, env, bench args...
  local tag=$1 v=$2; shift 2
  env $v timeout 60 ./build/moekit "$@" --reps 5 > /dev/null 2>&1  # JIT warm-up
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 50 > $OUT/smi.txt &
  local pid=$!
  env $v timeout 60 ./build/moekit "$@" --reps ${REPS:-2500} > $OUT/b.txt 2>&1
  kill $pid; wait $pid 2>/dev/null
  local us=$(awk '$1 ~ /^[0-9]+$/ && NF > 6 {print $5, $6; exit} $1 == "contiguous" {print $8, $9; exit}' $OUT/b.txt)
  env $v timeout 100 ncu --clock-control base --kernel-name regex:fp8_gemm --launch-skip 2 --launch-count 1 --metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum ./build/moekit "$@" --reps 3 > $OUT/ncu.txt 2>&1
  echo "$tag [$v] us/TFLOPS $us | $(awk -F', ' '$2 > 300 {n++; c += $1; p += $2} END {printf "n %d sm %.0f MHz %.0f W", n, c/n, p/n}' $OUT/smi.txt) | base-clock $(grep -E 'duration|sectors' $OUT/ncu.txt | awk '{printf "%s %s ", $(NF-1), $NF}')"
}
D="bench gemm --shapes 4096:7168:16384 --no-baseline"
run dense_c1 MOEKIT_X=0 $D --config m128n128s5g8x132c1
run dense_c2 MOEKIT_X=0 $D --config m128n128s5g8x132c2
run dense_c1_noload MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1 $D --config m128n128s5g8x132c1
run dense_c2_noload MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1 $D --config m128n128s5g8x132c2
G="bench grouped --case contiguous:4:8192:4096:7168 --no-baseline"
REPS=1200 run grouped MOEKIT_X=0 $G
REPS=1200 run grouped_noload MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_LOADS=1 $G
echo "total $(( $(date +%s) - t0 )) s"
