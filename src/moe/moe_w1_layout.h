// The prepared W1's row order (moe_weights.cu has the layout), shared by the FP8 and MXFP4
// preparations (moe_weights.cu, moe_weights_mxfp4.cu).
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MOEKIT_HOST_DEVICE __host__ __device__
#else
#define MOEKIT_HOST_DEVICE
#endif

namespace moekit::detail {

/// SPEC row (gate rows [0, I), up rows [I, 2I)) of prepared row r of an expert, or -1 for a zero row.
MOEKIT_HOST_DEVICE inline int64_t prepared_source_row(int64_t r, int64_t inter) {
  const int64_t tile = r / 256, q = r % 256;
  const int64_t j = tile * 128 + (q / 128) * 64 + q % 64;  // h column
  if (j >= inter) return -1;
  return ((q / 64) % 2 == 1) ? inter + j : j;
}

}  // namespace moekit::detail
