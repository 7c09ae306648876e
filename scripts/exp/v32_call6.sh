# v32 device call 6: 256 x 128 pairs sharing A (c2: each CTA fetches half of A, so a stage costs it 32 KB of L2 -> SM
# fill instead of 48) with direct stores, on the (7168, 2048) masked rows, where the 4 x 256 row's K loop runs at
# ~0.93 us per K block against ~0.77 L2-fed (call 4's trace); two rounds against the single-CTA pick; traces.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
CASES="--case masked:4:256:7168:2048 --case masked:2:512:7168:2048 --case masked:1:1024:7168:2048 --case masked:1:1024:4096:7168"
for r in 1 2; do
  for cfg in m256n128s4g4x132c1r m256n128s4g4x132c2r; do
    echo "r$r $cfg: $(MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline $CASES 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
  done
done
source scripts/exp/bench_lib.sh
for cfg in m256n128s4g4x132c1r m256n128s4g4x132c2r; do trace_masked $cfg masked:4:256:7168:2048; done
echo "total $(( $(date +%s) - t0 )) s"
