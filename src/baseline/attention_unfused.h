// The unfused sparse attention the benchmark compares against (bench attention): what a framework
// implementation does — gather each token's keys into a dense bf16 tensor, two batched cuBLASLt
// GEMMs around a softmax kernel. Same semantics as moekit::sparse_attention (normalized output,
// sink, masks), bf16 scores and probabilities.
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

#include "baseline/cublaslt.h"
#include "moekit/attention.h"
#include "runtime/device_buffer.h"

namespace moekit::baseline {

class UnfusedSparseAttention {
 public:
  /// Buffers for up to `num_tokens` tokens of this shape (keys: topk + window per token).
  UnfusedSparseAttention(int64_t num_tokens, int heads, int dim, int keys_per_token);
  /// o bf16 [T, heads, dim], lse [T, heads]. Returns !ok when cuBLASLt cannot run the GEMMs.
  LtStatus run(const SparseAttentionArgs& args, const AttentionKv& kv, void* o, float* lse, cudaStream_t stream);

 private:
  int64_t tokens_;
  int heads_, dim_, keys_;  ///< keys_ rounded up to a multiple of 8
  CublasLt lt_;
  detail::DeviceBuffer k_, bias_, s_, p_;
};

}  // namespace moekit::baseline
