# v32 device call 8: masked 4 x 256 (7168, 2048) with 256-row tiles narrower than 128 columns (n112: 256 tiles = 1.94
# waves, every CTA streams ~2 tiles of B; n120: 240 tiles) with direct stores and 4 stages, against m256n128s4r (224
# tiles: 92 CTAs stream two tiles, 40 one); v24 measured n112 slower with 3 stages and the TMA store. Two rounds.
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
CASES="--case masked:4:256:7168:2048 --case masked:2:512:7168:2048 --case masked:1:1024:7168:2048"
for r in 1 2; do
  for cfg in m256n128s4g4x132c1r m256n112s4g4x132c1r m256n120s4g4x132c1r; do
    echo "r$r $cfg: $(MOEKIT_GROUPED_CONFIG=$cfg timeout 60 ./build/moekit bench grouped --no-baseline $CASES 2>&1 | awk '$1 == "masked" {printf "%s/%s/%s %s k%s | ", $2, $6, $7, $8, $14}')"
  done
done
source scripts/exp/bench_lib.sh
trace_masked m256n112s4g4x132c1r masked:4:256:7168:2048
echo "total $(( $(date +%s) - t0 )) s"
