# v20 device call 1: kernel-only timing (CUPTI) and the per-tensor-scaled cuBLASLt ceiling in
# bench gemm / bench grouped; GEMM ceilings at the MoE layer's T = 16384 shapes; a trace of the
# masked 1 x 1024 (7168, 2048) case.
GTEST_FILTER='*Baseline*:*Lt*'
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
timeout 240 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
show_gemm $OUT/bench_gemm.txt
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
show_grouped $OUT/bench_grouped.txt
timeout 120 ./build/moekit bench gemm --shapes 131072:4096:7168,131072:7168:2048 --reps 10 > $OUT/bench_gemm_moe.txt 2>&1
show_gemm $OUT/bench_gemm_moe.txt
MOEKIT_TRACE_GEMM=masked timeout 60 ./build/moekit bench grouped --no-baseline --reps 3 --case masked:1:1024:7168:2048 --case masked:1:1024:4096:7168 > $OUT/trace.txt 2>&1
grep -A2 "moekit trace" $OUT/trace.txt | head -12; grep -A2 "moekit trace" $OUT/trace.txt | tail -6
grep -E "^masked" $OUT/trace.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
echo "total $(( $(date +%s) - t0 )) s"
