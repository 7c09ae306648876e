# v30 device call 1: how close can any layer built from today's kernels come to issue 4's 1000 TFLOPS?
# At the power limit a layer's time is its energy over the power it may draw (v28), so this measures,
# in the steady state (>= 1.5 s back to back, --energy), the energy of the layer's FLOPs done as
#  - dense GEMMs (131072x4096x7168 = GEMM1's, 131072x7168x2048 = GEMM2's; ours and cuBLASLt),
#  - plain contiguous grouped GEMMs on 256 experts x 512 rows (no tails, no fused epilogues, chains of 128),
#  - the layer itself (T = 4096, 16384),
# plus the energy of moving DRAM bytes (1 GiB copies) and the idle power, on both --data kinds.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
nvidia-smi -q -d POWER | grep -E "Power Limit|Power Draw" | head -6
for d in uniform normal; do
  timeout 150 ./build/moekit bench gemm --shapes 131072:4096:7168,131072:7168:2048 --reps 10 --energy --data $d > $OUT/gemm_$d.txt 2>&1
  echo "== gemm $d ($(( $(date +%s) - t0 )) s)"
  grep -E "^ *M |^ *131072 " $OUT/gemm_$d.txt | cut -c1-170
  grep -E "^# energy" $OUT/gemm_$d.txt
done
C="--case contiguous:256:512:4096:7168 --case contiguous:256:512:7168:2048"
for d in uniform normal; do
  timeout 150 ./build/moekit bench grouped $C --reps 10 --energy --data $d > $OUT/grouped_$d.txt 2>&1
  echo "== grouped $d ($(( $(date +%s) - t0 )) s)"
  grep -E "^layout|^contiguous" $OUT/grouped_$d.txt | cut -c1-200
  grep -E "^# energy" $OUT/grouped_$d.txt
done
for d in uniform normal; do
  timeout 150 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline --no-check --reps 10 --energy --data $d > $OUT/moe_$d.txt 2>&1
  echo "== moe $d ($(( $(date +%s) - t0 )) s)"
  awk '$1 == "deepseek-v3" {printf "T=%s %s us %s TF\n", $2, $5, $8}' $OUT/moe_$d.txt
  grep -E '^# (energy|stages)' $OUT/moe_$d.txt | sed 's/ (us)//' | cut -c1-200
done
echo "total $(( $(date +%s) - t0 )) s"
