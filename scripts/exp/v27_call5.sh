# v27 device call 5: issue 4's T = 16384 target against the GEMMs alone. The deepseek-v3 layer at
# T = 16384 is 11.55 PFLOP (GEMM1 131072 x 4096 x 7168, GEMM2 131072 x 7168 x 2048); 1000 TFLOPS is
# 11.55 ms in all. Here: the same FLOPs as two dense GEMMs (no grouping, no SwiGLU, chains of 128,
# bf16 out), ours and cuBLASLt's block-scaled FP8, and the plain grouped kernel on the layer's
# expert split (256 x 512 rows), in bench gemm / grouped's regime (cool-down, then 10 reps).
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
for r in 1 2; do
  timeout 200 ./build/moekit bench gemm --reps 10 --shapes 131072:4096:7168,131072:7168:2048 > $OUT/gemm_r$r.txt 2>&1; grep -E "^131072|^ *M " $OUT/gemm_r$r.txt
done
timeout 200 ./build/moekit bench grouped --reps 10 --case contiguous:256:512:4096:7168 --case contiguous:256:512:7168:2048 > $OUT/grouped.txt 2>&1; grep -E "^contiguous|^layout" $OUT/grouped.txt
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
