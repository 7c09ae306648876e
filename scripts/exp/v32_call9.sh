# v32 device call 9: three load-side experiments on DeepGEMM's masked rows (compile-time switches through
# MOEKIT_JIT_DEFINES, default picks): the first tile's first stage not queued behind the others in DRAM
# (MOEKIT_FIRST_BURST=1 / 2), B with an L2 evict-first policy (MOEKIT_B_EVICT_FIRST=1), with A evict-last on top.
# Two interleaved rounds. (Needs the experiment switches of commit 'B loads with an L2 evict-first policy'^, removed since.)
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2; do
  for d in "" MOEKIT_FIRST_BURST=1 MOEKIT_FIRST_BURST=2 MOEKIT_B_EVICT_FIRST=1 MOEKIT_B_EVICT_FIRST=1,MOEKIT_A_EVICT_LAST=1; do
    echo "r$r ${d:-default}: $(MOEKIT_JIT_DEFINES=$d timeout 60 ./build/moekit bench grouped --no-baseline $MASKED 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
  done
done
source scripts/exp/bench_lib.sh
for d in "" MOEKIT_FIRST_BURST=1; do MOEKIT_JIT_DEFINES=$d trace_masked "" masked:4:256:7168:2048; done
echo "total $(( $(date +%s) - t0 )) s"
