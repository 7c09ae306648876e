# v19: per-CTA timelines (MOEKIT_TRACE_GEMM) of split-K against the unsplit kernel on small-M shapes.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
for spec in 64:7168:2048/m64n128s8g1x56c1 64:7168:2048/m64n128s7g1x112c1k2 64:7168:2048/m64n128s7g1x128c1k8 \
            64:2112:7168/m64n16s10g1x132c1 64:2112:7168/m64n64s10g1x99c1k3 64:24576:1536/m64n128s7g1x128c1k8; do
  shape=${spec%/*}; cfg=${spec#*/}
  echo "== $shape $cfg"
  MOEKIT_TRACE_GEMM=dense ./build/moekit bench gemm --no-baseline --reps 1 --shapes $shape --config $cfg 2>&1 | grep -A2 "moekit trace" | tail -3
done
