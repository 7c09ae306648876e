// Carves a caller's workspace into 256-byte aligned regions; with base == nullptr it only measures,
// so the same code computes a workspace's size and lays it out.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

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

}  // namespace moekit::detail
