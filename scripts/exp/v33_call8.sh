# v33 device call 8: the layer at T = 16384 (and 4096) with the v32 B-scale reads against HEAD's defaults, ABBA order
# (the final check's T = 16384 ran 2% slower than v32's, both GEMM stages +4%: machine or change?).
SKIP_TESTS=1 source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
V32=MOEKIT_JIT_DEFINES=MOEKIT_SB_AHEAD=0,MOEKIT_SB_PREFETCH=0
moe_round v32reads 1 4096,16384 $V32
moe_round head 1 4096,16384
moe_round head 2 4096,16384
moe_round v32reads 2 4096,16384 $V32
for f in $OUT/ab_*_r*.txt; do echo "$(basename $f): $(grep '# stages.*16384' $f | cut -c1-200)"; done
echo "total $(( $(date +%s) - t0 )) s"
