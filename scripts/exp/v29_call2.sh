# v29 device call 2: (1) DRAM and L2 bytes of the prefill GEMMs (v28's open question: do single CTAs re-read
# weights from DRAM?) — ncu on one launch each at T = 16384, deepseek-v3: GEMM1 as B-multicast pairs (default)
# and as single CTAs; GEMM2 (rows) dynamic singles (default), static singles and static A-sharing pairs.
# (2) accuracy on --data normal: every preset at T in {1, 7, 64, 1000, 4096}, default chains and chains of 128.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
t0=$(date +%s)
MET='--metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum'
run_ncu() {  # KERNEL_REGEX ENV...
  local k=$1; shift
  env "$@" timeout 120 ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 2 > /dev/null 2>&1  # JIT warm-up
  env "$@" timeout 200 ncu --kernel-name regex:$k --launch-skip 1 --launch-count 1 $MET ./build/moekit bench moe --tokens 16384 --no-check --no-baseline --reps 1 > $OUT/ncu.txt 2>&1
  echo "ncu $k [$*] $(grep -E 'dram__bytes|lts__t_bytes|duration' $OUT/ncu.txt | awk '{printf "%s=%s%s ", $1, $NF, $(NF-1)}' | sed 's/dram__bytes_read.sum/dram_rd/;s/dram__bytes_write.sum/dram_wr/;s/lts__t_bytes.sum/l2/;s/gpu__time_duration.sum/dur/')"
}
run_ncu moe_gemm1 MOEKIT_X=0
run_ncu moe_gemm1 MOEKIT_MOE_GEMM1_CONFIG=m64n256s5g8x132c1
run_ncu fp8_gemm_contiguous MOEKIT_X=0
run_ncu fp8_gemm_contiguous MOEKIT_MOE_DYNAMIC=g1
run_ncu fp8_gemm_contiguous MOEKIT_MOE_DYNAMIC=g1 MOEKIT_GROUPED_CONFIG=m256n128s3g8x132c2
echo "ncu part $(( $(date +%s) - t0 )) s"
for pk in 0 128; do
  timeout 200 ./build/moekit bench moe --preset all --tokens 1,7,64,1000,4096 --no-baseline --reps 2 --data normal --gemm1-promote-k $pk > $OUT/acc_$pk.txt 2>&1
  echo "normal data, promote_k $pk: $(awk '$2 ~ /^[0-9]+$/ && $4 ~ /e-0/ {printf "%s/%s %s | ", substr($1,1,8), $2, $4}' $OUT/acc_$pk.txt)"
done
echo "total $(( $(date +%s) - t0 )) s"
