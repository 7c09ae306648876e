// moekit — inline PTX for global-memory loads that ptx.cuh's chain-safe ld_chain must not replace.
// Like ptx.cuh it includes nothing, so NVRTC can compile it without the CUDA toolkit headers.
#pragma once

namespace moekit::ptx {

/// 16-byte read-only load that does not allocate in L1, for data streamed once (a quantizer's
/// input). ld.global.nc assumes the data stays read-only for the reading kernel's whole lifetime:
/// only for buffers no kernel still running may write (see ld_chain in ptx.cuh).
__device__ __forceinline__ uint4 ld_global_nc_no_allocate_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

}  // namespace moekit::ptx
