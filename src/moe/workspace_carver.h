// Carves a caller's workspace into 256-byte aligned regions; with base == nullptr it only measures,
// so the same code computes a workspace's size and lays it out.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "moekit/moe_sort.h"

namespace moekit::detail {

struct WorkspaceCarver {
  char* base;
  size_t used = 0;
  /// The next region of `count` elements of T (count < 0 counts as 0); nullptr while measuring.
  template <typename T>
  T* take(int64_t count) {
    used = (used + 255) / 256 * 256;
    T* p = base ? reinterpret_cast<T*>(base + used) : nullptr;
    used += static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(T);
    return p;
  }
};

/// The sort's regions of a MoE forward's workspace: its output maps and its scratch.
struct MoeSortRegions {
  MoeSortBuffers sort;  ///< invalid_count is the caller's
  void* ws;
  size_t ws_bytes;
  int64_t rows;  ///< moe_sort_rows_bound(t, k, local_count)
};

inline MoeSortRegions take_sort_regions(WorkspaceCarver& c, int64_t t, int k, int local_count) {
  MoeSortRegions r{};
  r.rows = moe_sort_rows_bound(t, k, local_count);
  r.sort.expert_counts = c.take<int32_t>(local_count);
  r.sort.expert_offsets = c.take<int32_t>(local_count + 1);
  r.sort.permuted_to_expanded = c.take<int32_t>(r.rows);
  r.sort.expanded_to_permuted = c.take<int32_t>(std::max<int64_t>(t * k, 1));
  r.ws_bytes = moe_sort_workspace_size(t, k, local_count);
  r.ws = c.take<char>(static_cast<int64_t>(r.ws_bytes));
  return r;
}

}  // namespace moekit::detail
