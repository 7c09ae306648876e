#include "runtime/driver.h"

#include <mutex>
#include <cuda_runtime_api.h>

#include "common/check.h"

namespace moekit::detail {
namespace {

template <typename Fn>
void resolve(const char* name, Fn& out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || fn == nullptr) {
    cudaGetLastError();
    throw_error(ErrorCode::kUnsupportedDevice,
                concat("moekit: cannot resolve CUDA driver function ", name, " (is an NVIDIA driver installed?)"));
  }
  out = reinterpret_cast<Fn>(fn);
}

}  // namespace

const DriverApi& driver() {
  static std::once_flag once;
  static DriverApi api;
  static bool ok = false;
  std::call_once(once, [] {
    try {
      DriverApi a;
      resolve("cuModuleLoadData", a.moduleLoadData);
      resolve("cuModuleGetFunction", a.moduleGetFunction);
      resolve("cuFuncSetAttribute", a.funcSetAttribute);
      resolve("cuLaunchKernelEx", a.launchKernelEx);
      resolve("cuTensorMapEncodeTiled", a.tensorMapEncodeTiled);
      resolve("cuGetErrorString", a.getErrorString);
      api = a;
      ok = true;
    } catch (...) {
      ok = false;
    }
  });
  MOEKIT_REQUIRE(ok, ErrorCode::kUnsupportedDevice, "moekit: the CUDA driver API is not available");
  return api;
}

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* msg = nullptr;
  if (driver().getErrorString) driver().getErrorString(r, &msg);
  throw_error(ErrorCode::kCudaError, concat("moekit: CUDA driver error in ", what, ": ", static_cast<int>(r), " ",
                                            msg ? msg : "(unknown)"));
}

}  // namespace moekit::detail
