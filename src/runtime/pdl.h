// Programmatic dependent launch (PDL) for the MoE forward's kernel chain.
//
// Inside a PdlScope (the calling thread's), launch_pdl() and the FP8 GEMM launcher add the
// programmatic-stream-serialization attribute, so each kernel's launch and prologue overlap the
// tail of the one before it. Every kernel launched that way must call ptx::griddep_wait() before
// its first global-memory access that could conflict with earlier work in the stream (reads of
// upstream outputs, and writes of buffers an earlier kernel may still read), and should call
// ptx::griddep_launch_dependents() once it has passed that wait. Outside a scope launches are
// plain (and the device calls are no-ops). Stream capture records the launches as programmatic
// graph edges.
#pragma once
#include <cuda_runtime.h>

#include "common/check.h"

namespace moekit::detail {

/// True inside a PdlScope on this thread.
bool pdl_active();

/// Enables PDL launches on this thread for its lifetime (nests; restores the previous state).
class PdlScope {
 public:
  explicit PdlScope(bool on = true);
  ~PdlScope();
  PdlScope(const PdlScope&) = delete;
  PdlScope& operator=(const PdlScope&) = delete;

 private:
  bool prev_;
};

/// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute inside a PdlScope.
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (pdl_active()) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  MOEKIT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...));
}

}  // namespace moekit::detail
