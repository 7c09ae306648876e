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

/// FP32 store and load at the L2 (.cg: not cached in L1), for data one CTA hands to another within
/// a launch (an L1 line of the reader could be older than the writer's store).
__device__ __forceinline__ void st_global_cg_f32(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ float ld_global_cg_f32(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}

/// GPU-scope fence (fence.acq_rel.gpu) and a short back-off for spin loops.
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
__device__ __forceinline__ void nanosleep(unsigned ns) { asm volatile("nanosleep.u32 %0;" ::"r"(ns)); }

/// A flag's load with .acquire.gpu semantics: once it reads the value a peer CTA stored with
/// st_release_gpu_u32, this thread sees every write that peer published before that store.
__device__ __forceinline__ unsigned ld_acquire_gpu_u32(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/// A flag's store with .release.gpu semantics (pairs with ld_acquire_gpu_u32).
__device__ __forceinline__ void st_release_gpu_u32(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

}  // namespace moekit::ptx
