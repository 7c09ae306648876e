# (The MOEKIT_DYNAMIC_PAIRS switch this script sets was a temporary patch of contiguous_config, removed after the call: dynamic pairs measured slower.)
# v27 device call 16: the layer's prefill GEMM2 (the plain contiguous kernel, bf16 rows) as A-sharing
# pairs that claim units dynamically (PairClaims), against the default dynamic single CTAs:
# MOEKIT_GROUPED_CONFIG=m256n128s3g8x132c2 MOEKIT_DYNAMIC_PAIRS=1 (diagnostic). T = 8192 and 16384,
# three interleaved rounds; then one checked run (rel_l2 on sampled rows) with the pairs.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
run() {  # TAG ROUND ENV...
  local tag=$1 r=$2; shift 2
  env "$@" timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 8192,16384 --no-baseline --no-check > $OUT/g2_${tag}_r$r.txt 2>&1
  echo "$tag r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/g2_${tag}_r$r.txt) $(grep '# stages' $OUT/g2_${tag}_r$r.txt | sed 's/.*T=\([0-9]*\) (us): .*gemm2_rows \([0-9.]*\).*/[\1 g2 \2]/' | tr '\n' ' ') $(grep -m1 -i error $OUT/g2_${tag}_r$r.txt)"
}
for r in 1 2 3; do
  run pairs $r MOEKIT_GROUPED_CONFIG=m256n128s3g8x132c2 MOEKIT_DYNAMIC_PAIRS=1
  run single $r MOEKIT_DYNAMIC_PAIRS=0
done
MOEKIT_GROUPED_CONFIG=m256n128s3g8x132c2 MOEKIT_DYNAMIC_PAIRS=1 timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline > $OUT/check.txt 2>&1
grep -E '^deepseek' $OUT/check.txt | cut -c1-60
