# v20 device call 2: bench gemm / grouped with cool-down before long passes and DeepGEMM's method
# (kernel-only, L2 flush) next to the event times; GEMM ceilings at the MoE T = 16384 shapes, cool
# and hot (no cool-down: the per-tensor pass runs last, after ~4 passes of back-to-back work).
SKIP_TESTS=1
source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
timeout 300 ./build/moekit bench gemm > $OUT/bench_gemm.txt 2>&1
show_gemm $OUT/bench_gemm.txt
timeout 300 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
show_grouped $OUT/bench_grouped.txt
timeout 150 ./build/moekit bench gemm --shapes 131072:4096:7168,131072:7168:2048 --reps 10 > $OUT/bench_gemm_moe_cool.txt 2>&1
show_gemm $OUT/bench_gemm_moe_cool.txt
timeout 150 ./build/moekit bench gemm --shapes 131072:4096:7168,131072:7168:2048 --reps 30 --cooldown-ms 0 > $OUT/bench_gemm_moe_hot.txt 2>&1
show_gemm $OUT/bench_gemm_moe_hot.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
echo "total $(( $(date +%s) - t0 )) s"
