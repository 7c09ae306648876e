// The launch shape shared by the moe_sort kernels (moe_sort.cu) and the permutation kernels
// (moe_permute.cu), and the alignment check of their buffer arguments.
#pragma once
#include <cstdint>

#include "moekit/numerics.h"

namespace moekit::detail::sort_launch {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxGrid = 1 << 16;  // grid-stride beyond this many CTAs

inline bool aligned_to(const void* ptr, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) == 0;
}

inline int grid_for(int64_t work, int64_t per_block) {
  const int64_t blocks = ceil_div(work, per_block);
  return static_cast<int>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

}  // namespace moekit::detail::sort_launch
