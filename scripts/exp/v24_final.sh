# v24 final check (committed build: the kernels are v23's; every change tried in v24 was removed):
# the whole GPU suite, bench gemm, bench grouped (with cuBLASLt and cool-downs), the main job, then
# three more rounds of DeepGEMM's masked rows alone and one traced launch.
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
main_benches
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2 3; do
  timeout 60 ./build/moekit bench grouped --no-baseline $MASKED > $OUT/m.txt 2>&1
  echo "masked r$r: $(awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}' $OUT/m.txt)"
done
MOEKIT_TRACE_GEMM=fp8_gemm timeout 60 ./build/moekit bench grouped --no-baseline --reps 2 --case masked:4:256:7168:2048 2>&1 | grep -A3 "moekit trace" | tail -4
echo "total $(( $(date +%s) - t0 )) s"
