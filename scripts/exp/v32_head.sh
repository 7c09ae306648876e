# v32 HEAD check (headers differ from call 14's build only in comments and whitespace): the direct-store and masked
# GPU tests, three rounds of DeepGEMM's masked rows.
GTEST_FILTER='GemmFp8.DirectStore:GroupedGemmDirectStore.*:GroupedGemmMasked.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
MASKED="--case masked:1:1024:4096:7168 --case masked:1:1024:7168:2048 --case masked:2:512:4096:7168 --case masked:2:512:7168:2048 --case masked:4:256:4096:7168 --case masked:4:256:7168:2048"
for r in 1 2 3; do masked_round "masked r$r"; done
echo "total $(( $(date +%s) - t0 )) s"
