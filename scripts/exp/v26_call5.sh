# v26 device call 5: clock and power while the layer runs T = 16384 with GEMM1 in 128- or 64-row tiles
# (nvidia-smi every 100 ms; medians over the samples above 300 W), three interleaved rounds.
# (MOEKIT_GEMM1_TILE_M and the 128-row GEMM1 tile exist only in commit dfd4570, reverted after these calls.)
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
for r in 1 2 3; do
  for v in 128 64; do
    nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 > $OUT/smi_$v$r.txt &
    smi=$!
    MOEKIT_GEMM1_TILE_M=$v timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 16384 --no-baseline --no-check > $OUT/moe_$v$r.txt 2>&1
    kill $smi
    echo "m$v r$r: us $(awk '$1 ~ /^deepseek/ {print $5}' $OUT/moe_$v$r.txt) GEMM1 $(grep -h '^# stages' $OUT/moe_$v$r.txt | sed -E 's/.*gemm1_swiglu ([0-9.]+).*/\1/') | clock $(awk -F', ' '$2 > 300 {print $1}' $OUT/smi_$v$r.txt | sort -n | awk '{a[NR]=$1} END {print a[int(NR/2)+1] " MHz (n=" NR ")"}') power $(awk -F', ' '$2 > 300 {print $2}' $OUT/smi_$v$r.txt | sort -n | awk '{a[NR]=$1} END {print a[int(NR/2)+1] " W"}')"
  done
done
echo "total $(( $(date +%s) - t0 )) s"
