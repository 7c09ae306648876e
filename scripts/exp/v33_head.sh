# v33 HEAD check on another machine: the masked GPU tests, bench grouped (with cuBLASLt), three more rounds of
# DeepGEMM's masked rows and a trace of 1 x 1024 (4096, 7168) with the SM clock.
GTEST_FILTER='GroupedGemmMasked.*:GroupedGemmDirectStore.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
timeout 200 ./build/moekit bench grouped > $OUT/bench_grouped.txt 2>&1
show_grouped $OUT/bench_grouped.txt
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2 3; do masked_round "masked r$r"; done
trace_masked "" masked:1:1024:4096:7168
echo "total $(( $(date +%s) - t0 )) s"
