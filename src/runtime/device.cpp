#include "runtime/device.h"

#include <mutex>
#include <vector>
#include <cuda_runtime_api.h>

#include "common/check.h"

namespace moekit::detail {

bool gpu_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

const DeviceInfo& current_device() {
  static std::mutex mu;
  static std::vector<DeviceInfo*> cache;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw_error(ErrorCode::kUnsupportedDevice,
                concat("moekit: no usable CUDA device (", cudaGetErrorString(e), ")"));
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() <= static_cast<size_t>(dev)) cache.resize(dev + 1, nullptr);
  if (!cache[dev]) {
    auto* info = new DeviceInfo();  // lives for the process: handed out by reference
    info->device = dev;
    MOEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&info->cc_major, cudaDevAttrComputeCapabilityMajor, dev));
    MOEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&info->cc_minor, cudaDevAttrComputeCapabilityMinor, dev));
    MOEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&info->num_sms, cudaDevAttrMultiProcessorCount, dev));
    int v = 0;
    MOEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    info->smem_optin = static_cast<size_t>(v);
    MOEKIT_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, dev));
    info->l2_bytes = static_cast<size_t>(v);
    if (info->cc_major >= 9)  // clusters exist from sm_90 on
      for (int c = 1; c <= 8; ++c) info->max_clusters[c] = max_active_clusters(c, info->smem_optin);
    cache[dev] = info;
  }
  return *cache[dev];
}

const DeviceInfo& require_sm90(const char* what) {
  const DeviceInfo& d = current_device();
  MOEKIT_REQUIRE(d.cc_major == 9 && d.cc_minor == 0, ErrorCode::kUnsupportedDevice, what,
                 ": moekit kernels need a Hopper GPU (sm_90); the current device is sm_", d.cc_major,
                 d.cc_minor);
  return d;
}

}  // namespace moekit::detail
