#!/bin/bash
# Device call (v15, after the tile-pipe fix): the GPU suite, memcheck and racecheck on the
# representative set, bench gemm, bench grouped and the main job.
source scripts/exp/gpu_suite.sh
NO_TAR=1 bash scripts/exp/v15_sanitize.sh
source scripts/exp/bench_lib.sh
main_benches
echo "total $(( $(date +%s) - t0 )) s"
(cd $OUT && tar czf final.tgz *.txt *.log && rm -f *.txt *.log)
