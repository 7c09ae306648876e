// The MoE layer's internal forward (SPEC §3): weight preparation and one call that runs
// sort → permute/quantize → GEMM1(+SwiGLU+requant) → GEMM2(+weighted combine) on a stream.
// The public MoeLayer (include/moekit/moe_layer.h) is a validated wrapper over these functions;
// the kernels behind them may change (unfused today, fused epilogues next) without touching it.
// No host synchronization anywhere: graph-capturable once the kernels are compiled (see
// moe_forward_prepare_kernels).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "moekit/moe_layer.h"
#include "moekit/routing.h"
#include "planning/moe_plan.h"

namespace moekit::detail {

/// Sizes of the prepared weight buffers for E experts of shape H x I (bytes).
struct MoePreparedSizes {
  size_t w1_bytes = 0;   ///< prepared W1 (FP8, or MXFP4 sub-chunks)
  size_t sw1_bytes = 0;  ///< prepared W1 scales (FP32)
  // MXFP4 only (moe_prepare_w1_mxfp4 / moe_prepare_w2_mxfp4):
  size_t sw1_blocks_bytes = 0;  ///< W1's block scales in the SPEC layout
  size_t w2_bytes = 0;          ///< W2's sub-chunks
  size_t sw2_bytes = 0;         ///< W2's block scales
  size_t b1_bytes = 0, b2_bytes = 0;  ///< FP32 biases [E, 2I] and [E, H] (the fused layout reserves them)
};
MoePreparedSizes moe_prepared_sizes(int num_experts, int64_t hidden, int64_t inter,
                                    MoeWeightFormat format = MoeWeightFormat::kFp8);

/// Prepares W1 [E, 2I, H] FP8 with scales sW1 [E, ceil(2I/128), ceil(H/128)] (SPEC convention:
/// rows [0, I) gate, [I, 2I) up) into w1p / sw1p (sizes from moe_prepared_sizes, 256-byte aligned).
/// Asynchronous on `stream`; the inputs may be freed once the stream has passed this call.
void moe_prepare_w1(const void* w1, const float* sw1, int num_experts, int64_t hidden, int64_t inter, void* w1p,
                    float* sw1p, cudaStream_t stream);

/// The buffers of one forward (device pointers); the shapes and every choice are the plan's.
struct MoeForwardRequest {
  const void* x = nullptr;                ///< bf16 [T, H]
  const int32_t* topk_ids = nullptr;      ///< [T, k] (ignored when the plan routes from logits)
  const float* topk_weights = nullptr;    ///< [T, k] (ignored when the plan routes from logits)
  /// Routing from logits (MoePlan::from_logits): the routed ids and weights are written to
  /// routed_ids / routed_weights [T, k].
  const void* logits = nullptr;           ///< [T, E]
  LogitsType logits_type = LogitsType::kFloat32;
  int32_t* routed_ids = nullptr;
  float* routed_weights = nullptr;
  const void* w1p = nullptr;              ///< prepared W1 (moe_prepare_w1)
  const float* sw1p = nullptr;            ///< prepared W1 scales
  const void* w2 = nullptr;               ///< FP8 [E_local, H, I] (MXFP4: prepared sub-chunks)
  const float* sw2 = nullptr;             ///< [E_local, ceil(H/128), ceil(I/128)]
  const float* b1 = nullptr;              ///< FP32 [E_local, 2I] (SPEC order) or null
  const float* b2 = nullptr;              ///< FP32 [E_local, H] or null
  void* y = nullptr;                      ///< bf16 [T, H], fully written
  /// MoePlan::prequantized: the tokens as FP8 [T, H] (row stride H, 16-byte aligned) and their
  /// 1x128 scales — in the physical layout over T rows (numerics.h) when the plan gathers, else
  /// token-major [T, ceil(H/128)]; x is not read.
  const void* xq = nullptr;
  const float* sxq = nullptr;
  /// Deterministic plans only (MoePlan::gemm2.rows_then_combine), instead of y: each kept slot's
  /// unweighted GEMM2 row, bf16 [T, k, H] (slot t * k + j; rows of dropped slots are not written).
  /// The expert-parallel layer sums them in slot order on the token's own rank.
  void* slot_rows = nullptr;
  int32_t* invalid_count = nullptr;       ///< [1] device: slots with an id outside [-1, E_total)
};

/// Scratch bytes moe_forward needs for T tokens (a pure function of the sizes and the device).
size_t moe_forward_workspace_size(int64_t num_tokens, int top_k, int64_t hidden, int64_t inter, int local_count,
                                  bool mxfp4 = false);

/// Executes `plan` (plan_moe_forward) on `stream`: launches exactly the kernels it names, with its
/// configurations. `workspace` 256-byte aligned, at least moe_forward_workspace_size bytes.
/// Arguments are assumed valid (the public layer validates them).
void moe_forward(const MoePlan& plan, const MoeForwardRequest& request, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream);

}  // namespace moekit::detail
