// CUDA driver API entry points, resolved at run time through the runtime
// (cudaGetDriverEntryPointByVersion), so the library and its tests link and start on machines
// without a driver (CI). Each call's CUresult is turned into a moekit::Error.
#include <cuda.h>
#pragma once

namespace moekit::detail {

struct DriverApi {
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuLaunchKernelEx) launchKernelEx = nullptr;
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
};

/// The resolved driver entry points (throws ErrorCode::kUnsupportedDevice without a driver).
const DriverApi& driver();

/// Throws ErrorCode::kCudaError with the driver's message unless r == CUDA_SUCCESS.
void check_cu(CUresult r, const char* what);

}  // namespace moekit::detail
