// RAII device allocation used by tests, benchmarks and the host runtime.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>
#include <cuda_runtime_api.h>

#include "common/check.h"

namespace moekit::detail {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes) MOEKIT_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

  /// Copies host data in (synchronous).
  template <typename T>
  void upload(const std::vector<T>& v) {
    MOEKIT_REQUIRE(v.size() * sizeof(T) <= bytes_, ErrorCode::kInternal, "DeviceBuffer::upload overflow");
    MOEKIT_CUDA_CHECK(cudaMemcpy(ptr_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  /// A new buffer holding a copy of `v` (synchronous).
  template <typename T>
  static DeviceBuffer from(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v);
    return b;
  }
  /// Copies the first n elements out (synchronous).
  template <typename T>
  std::vector<T> download(size_t n) const {
    std::vector<T> v(n);
    MOEKIT_REQUIRE(n * sizeof(T) <= bytes_, ErrorCode::kInternal, "DeviceBuffer::download overflow");
    MOEKIT_CUDA_CHECK(cudaMemcpy(v.data(), ptr_, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  /// Sets every byte to `value` (synchronous), e.g. to poison an output. cudaMemset may return
  /// before it completes, and work on non-blocking streams does not wait for it: synchronize.
  void fill_bytes(int value) {
    if (!bytes_) return;
    MOEKIT_CUDA_CHECK(cudaMemset(ptr_, value, bytes_));
    MOEKIT_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace moekit::detail
