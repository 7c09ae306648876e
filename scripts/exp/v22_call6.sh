# v22 device call 6: which GEMM2 config the layer picks at T = 16384 (MOEKIT_LOG_CONFIG), and an
# A/B of the main job at T = 4096 / 16384 with 256-row tiles on (default) and off
# (MOEKIT_WIDE_TILES=0: the prefill GEMM2 on 128-row tiles as in v21), three interleaved rounds;
# then the sanitizers of v22_final2.sh.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
source scripts/exp/bench_lib.sh
t0=$(date +%s)
for r in 1 2 3; do
  for w in 1 0; do
    MOEKIT_WIDE_TILES=$w MOEKIT_LOG_CONFIG=$([ $r = 1 ] && echo 1 || echo 0) timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline > $OUT/moe_w${w}_r$r.txt 2>&1
    echo "moe wide=$w r$r: $(moe_summary $OUT/moe_w${w}_r$r.txt)"
    [ $r = 1 ] && grep "fp8_gemm_contiguous" $OUT/moe_w${w}_r$r.txt | sort | uniq -c | head -3
  done
done
echo "A/B took $(( $(date +%s) - t0 )) s"
bash scripts/exp/v22_final2.sh
echo "total $(( $(date +%s) - t0 )) s"
