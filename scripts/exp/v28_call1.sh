# v28 device call 1: what the GEMM epilogues cost at prefill. MOEKIT_DIAG_NO_EPILOGUE=1 (results
# wrong) drops the SwiGLU + requant epilogue of GEMM1 and the bf16 row store of GEMM2; two interleaved
# rounds, deepseek-v3 T = 4096, 8192, 16384, layer us and the GEMM stage lines.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
run() {  # TAG ROUND ENV...
  local tag=$1 r=$2; shift 2
  env "$@" timeout 250 ./build/moekit bench moe --preset deepseek-v3 --tokens 4096,8192,16384 --no-baseline --no-check > $OUT/ab_${tag}_r$r.txt 2>&1
  echo "$tag r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s %s us; ", $2, $5}' $OUT/ab_${tag}_r$r.txt)"
  grep '# stages' $OUT/ab_${tag}_r$r.txt | sed 's/^/    /' | cut -c1-220
}
t0=$(date +%s)
for r in 1 2; do
  run base $r MOEKIT_X=0
  run noepi $r MOEKIT_JIT_DEFINES=MOEKIT_DIAG_NO_EPILOGUE=1
done
echo "took $(( $(date +%s) - t0 )) s"
