# v27 device call 10: the pair tail split (with dynamic pairs) at T = 4096, 8192 and 16384, three
# interleaved rounds of split on / off (layer totals and GEMM1 stages).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
run() {  # TAG SPLIT ROUND
  MOEKIT_GEMM1_TAIL_SPLIT=$2 timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,8192,16384 --no-baseline --no-check > $OUT/ab_$1_r$3.txt 2>&1
  echo "$1 r$3: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/ab_$1_r$3.txt) $(grep '# stages' $OUT/ab_$1_r$3.txt | sed 's/.*T=\([0-9]*\) (us): .*gemm1_swiglu \([0-9.]*\), gemm2_rows \([0-9.]*\).*/[\1 g1 \2]/' | tr '\n' ' ')"
}
for r in 1 2 3; do run s1 1 $r; run s0 0 $r; done
