// Internal MoE forward. Stage 0: the prepared W1 is a plain copy and the forward runs the unfused
// pipeline (moe_unfused.cpp); the fused GEMM1/GEMM2 epilogues replace it behind this interface.
#include "moe/moe_forward.h"

#include "common/check.h"
#include "moe/moe_unfused.h"
#include "moekit/numerics.h"

namespace moekit::detail {

MoePreparedSizes moe_prepared_sizes(int num_experts, int64_t hidden, int64_t inter) {
  MoePreparedSizes s;
  s.w1_bytes = static_cast<size_t>(num_experts) * size_t(2 * inter) * size_t(hidden);
  s.sw1_bytes = static_cast<size_t>(num_experts) * size_t(ceil_div(2 * inter, kQuantBlock)) *
                size_t(ceil_div(hidden, kQuantBlock)) * sizeof(float);
  return s;
}

void moe_prepare_w1(const void* w1, const float* sw1, int num_experts, int64_t hidden, int64_t inter, void* w1p,
                    float* sw1p, cudaStream_t stream) {
  const MoePreparedSizes s = moe_prepared_sizes(num_experts, hidden, inter);
  MOEKIT_CUDA_CHECK(cudaMemcpyAsync(w1p, w1, s.w1_bytes, cudaMemcpyDeviceToDevice, stream));
  MOEKIT_CUDA_CHECK(cudaMemcpyAsync(sw1p, sw1, s.sw1_bytes, cudaMemcpyDeviceToDevice, stream));
}

size_t moe_forward_workspace_size(int64_t num_tokens, int top_k, int64_t hidden, int64_t inter, int local_count) {
  return moe_unfused_workspace_size(num_tokens, top_k, hidden, inter, local_count);
}

void moe_forward(const MoeForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  MoeUnfusedArgs u;
  u.num_tokens = a.num_tokens;
  u.top_k = a.top_k;
  u.hidden = a.hidden;
  u.inter = a.inter;
  u.num_experts = a.num_experts;
  u.local_offset = a.local_offset;
  u.local_count = a.local_count;
  u.limit = a.limit;
  u.x = a.x;
  u.topk_ids = a.topk_ids;
  u.topk_weights = a.topk_weights;
  u.w1 = a.w1p;
  u.sw1 = a.sw1p;
  u.w2 = a.w2;
  u.sw2 = a.sw2;
  u.y = a.y;
  u.invalid_count = a.invalid_count;
  moe_forward_unfused(u, workspace, workspace_bytes, stream);
}

}  // namespace moekit::detail
