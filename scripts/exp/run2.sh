# Same-machine A/B: this build vs an older binary copied to build/old_moekit (MoE all T, dense
# M=4096 shapes, two rounds of the GEMMs).
export MOEKIT_CACHE_DIR=$PWD/.jitcache
S=4096:7168:16384,4096:4096:7168,4096:7168:2048,4096:2112:7168
for b in moekit old_moekit moekit old_moekit; do
  echo "== $b gemm"; timeout 150 ./build/$b bench gemm --shapes $S 2>&1 | grep -vE "^#|^\[" | head -12
done
for b in moekit old_moekit; do
  echo "== $b moe"; timeout 200 ./build/$b bench moe --no-baseline 2>&1 | grep -E "^deepseek|^# stages"
done
