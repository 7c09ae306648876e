// The unfused FP8 MoE forward (SPEC §3) composed from the tested stages: moe_sort →
// permute_quantize → grouped GEMM1 (contiguous) → swiglu_quantize → grouped GEMM2 → moe_combine.
// It is the in-process baseline the fused layer is measured against, and the first end-to-end
// check that the stages' layouts agree. GEMM1's output makes a bf16 round trip here (the fused
// epilogue will not). No host synchronization; graph-capturable once the kernels are compiled.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit::detail {

struct MoeUnfusedArgs {
  int64_t num_tokens = 0;  ///< T
  int top_k = 0;           ///< k
  int64_t hidden = 0;      ///< H (multiple of 16)
  int64_t inter = 0;       ///< I (multiple of 16)
  int num_experts = 0;     ///< E_total
  int local_offset = 0, local_count = 0;  ///< expert-parallel slice (local_count == E: everything)
  float limit = 0.0f;      ///< SwiGLU clamp (≤ 0: none)
  const void* x = nullptr;            ///< bf16 [T, H]
  const int32_t* topk_ids = nullptr;  ///< [T, k]
  const float* topk_weights = nullptr;///< [T, k]
  const void* w1 = nullptr;   ///< FP8 [E_local, 2I, H]: rows [0, I) gate, [I, 2I) up
  const float* sw1 = nullptr; ///< [E_local, ceil(2I/128), ceil(H/128)]
  const void* w2 = nullptr;   ///< FP8 [E_local, H, I]
  const float* sw2 = nullptr; ///< [E_local, ceil(H/128), ceil(I/128)]
  void* y = nullptr;          ///< bf16 [T, H]
  int32_t* invalid_count = nullptr;  ///< [1] device: invalid ids seen (see moe_sort)
};

/// Bytes of scratch memory moe_forward_unfused needs.
size_t moe_unfused_workspace_size(int64_t num_tokens, int top_k, int64_t hidden, int64_t inter, int local_count);

/// Runs the layer on `stream`. `workspace` must be 256-byte aligned.
void moe_forward_unfused(const MoeUnfusedArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace moekit::detail
