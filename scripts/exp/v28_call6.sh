# v28 device call 6: the gather variant with one-row TMA boxes (MOEKIT_GATHER_TMA=1, new default)
# against its cp.async form (=0). GEMM1 / layer tests + racecheck of the gather test; then deepseek-v3
# in two interleaved rounds: default rule (gather below 128 rows per expert), gather everywhere
# with TMA rows, gather everywhere with cp.async.
# Needs scripts/exp/v28_gather_tma.patch applied (the one-row TMA gather was removed after this call).
GTEST_FILTER='MoeGemm1Swiglu.*:MoeLayer.*' source scripts/exp/gpu_suite.sh
source scripts/exp/bench_lib.sh
RACECHECK_TIMEOUT=200 racecheck_run 'MoeGemm1Swiglu.GatherMatchesPermuted'
run() {  # TAG ROUND ENV...
  local tag=$1 r=$2; shift 2
  env "$@" timeout 250 ./build/moekit bench moe --preset deepseek-v3 --tokens 1,64,1024,2048,4096,16384 --no-baseline --no-check > $OUT/ab_${tag}_r$r.txt 2>&1
  echo "$tag r$r: $(awk '$1 == "deepseek-v3" {printf "T=%s %s; ", $2, $5}' $OUT/ab_${tag}_r$r.txt)"
  grep '# stages' $OUT/ab_${tag}_r$r.txt | grep -E 'T=(2048|4096|16384)' | sed 's/.*T=\([0-9]*\) (us): .*\(permute_quant\|quantize\) \([0-9.]*\), gemm1_swiglu \([0-9.]*\).*/    T=\1 \2 \3 g1 \4/'
}
for r in 1 2; do
  run rule $r MOEKIT_X=0
  run gtma $r MOEKIT_GEMM1_GATHER=1
  run gcp $r MOEKIT_GEMM1_GATHER=1 MOEKIT_JIT_DEFINES=MOEKIT_GATHER_TMA=0
done
echo "took $(( $(date +%s) - t0 )) s"
