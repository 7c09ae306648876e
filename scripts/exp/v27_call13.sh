# v27 device call 13: is the 1300 case's 1267-1276 TFLOPS (calls 11, 12) this code or this machine? The v26
# build (c4d36c0, build_old/moekit) and this one, interleaved: contiguous 4 x 8192 and 8 x 4096 (4096, 7168)
# and the dense 4096x7168x16384.
export MOEKIT_CACHE_DIR=$PWD/.jitcache
for r in 1 2 3; do
  for b in build_ab/old build_ab/new; do
    ./$b/moekit bench grouped --no-baseline --case contiguous:4:8192:4096:7168 --case contiguous:8:4096:4096:7168 > $OUT/g_${b//\//_}_$r.txt 2>&1
    ./$b/moekit bench gemm --no-baseline --shapes 4096:7168:16384 > $OUT/d_${b//\//_}_$r.txt 2>&1
    echo "$b r$r: $(awk '$1 == "contiguous" {printf "%s x %s: %s us %s TF | ", $2, $3, $8, $9}' $OUT/g_${b//\//_}_$r.txt) dense $(awk '$1 == 4096 {print $5, "us", $6, "TF"}' $OUT/d_${b//\//_}_$r.txt)"
  done
done
