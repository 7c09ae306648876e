// moekit._C — the nanobind extension: module-level functions and exception translation.
// The layer is bound in bind_layer.cpp, the low-level ops in bind_ops.cpp, DeepSeek-V4's attention
// in bind_attention.cpp; the tensor checks they share live in tensor.cpp.
#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.h"
#include "errors.h"
#include "moekit/error.h"
#include "runtime/jit.h"

namespace nb = nanobind;

namespace {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver / no GPU: not an error for a query
    return 0;
  }
  return n;
}

bool device_supported(int device) {
  const int n = device_count();
  if (n == 0) return false;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (device >= n) return false;
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  // The kernels are sm_90a code: Hopper only (sm_100 and later lack wgmma).
  return major == 9 && minor == 0;
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "moekit's C++ core: FP8 block-scaled MoE layer and GEMMs for Hopper (sm_90a)";

  moekit::py::register_error_translator();

  m.def(
      "version", [] { return std::string(MOEKIT_VERSION_STRING); }, "moekit's version (CMake project version).");
  m.def("cuda_device_count", &device_count, "Visible CUDA devices (0 without a driver or GPU; never raises).");
  m.def("device_supported", &device_supported, nb::arg("device") = -1,
        "True when `device` (-1: the current one) is a Hopper GPU (sm_90), which moekit's kernels need.");
  m.def(
      "cache_dir", [] { return moekit::jit::cache_dir(); },
      "Directory of the on-disk kernel cache (MOEKIT_CACHE_DIR, else ~/.cache/moekit); created on first use.");

  moekit::py::bind_layer(m);
  moekit::py::bind_ops(m);
  moekit::py::bind_bench_data(m);
  moekit::py::bind_attention(m);
}
