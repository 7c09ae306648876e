# v29 device call 1: does the operands' distribution change the power-limited figures?
# --data uniform (every E4M3 code equally likely, the benches' data so far) against --data normal
# (codes of amax-scaled normal data, as DeepGEMM's and vLLM's benchmarks and real checkpoints have):
# the deepseek-v3 layer at T = 4096 / 16384 with energy (two interleaved rounds), the dense GEMM and
# DeepGEMM's grouped table cases against cuBLASLt on the same data.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
for r in 1 2; do
  for d in uniform normal; do
    f=$OUT/moe_${d}_r$r.txt
    timeout 200 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,16384 --no-baseline --energy --data $d > $f 2>&1
    echo "moe $d r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s rel %s %s us %s TF; ", $2, $4, $5, $8}' $f)"
    grep -E '^# (energy|stages)' $f | sed 's/^/    /; s/ (us)//' | cut -c1-170
  done
done
echo "moe done $(( $(date +%s) - t0 )) s"
for d in uniform normal; do
  timeout 120 ./build/moekit bench gemm --shapes 4096:7168:16384,4096:4096:7168,4096:7168:2048 --data $d > $OUT/gemm_$d.txt 2>&1
  echo "gemm $d: $(gemm_summary $OUT/gemm_$d.txt)"
done
C="--case contiguous:4:8192:4096:7168 --case contiguous:4:8192:7168:2048 --case contiguous:8:4096:4096:7168 --case contiguous:8:4096:7168:2048"
C="$C --case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for d in uniform normal; do
  timeout 200 ./build/moekit bench grouped $C --data $d > $OUT/grouped_$d.txt 2>&1
  echo "grouped $d:"; show_grouped $OUT/grouped_$d.txt
done
echo "total $(( $(date +%s) - t0 )) s"
