// Host float64 reference of the whole MoE layer (SPEC §3), shared by the GPU tests of the layer and
// of the unfused forward and by `moekit bench moe`'s correctness column.
//
// Per token: a = quant_1x128(x[t]); for each slot j with a local expert e (ids outside [0, E) or
// the slice are skipped): (g, u) = W1[e]·a (float64, gemm_reference), optional bf16 rounding of
// g and u (the unfused path's GEMM1 output makes a bf16 round trip; the fused layer does not),
// clamp, h = silu(g)·u in float, hq = quant_1x128(h), y[t] += w[t, j] · W2[e]·hq (float64).
// gpt-oss's layer (SPEC §6): per-expert biases b1 (added to g, u) and b2 (added to W2[e]·hq before
// the router weight), and h = g·sigmoid(α g)·(u + 1) after the same clamps.
// Work is batched per expert (one GEMM over all slots of that expert), so the weights of each
// expert are decoded once; experts are fetched one at a time through a callback so a caller can
// stream them from the device instead of holding all of them on the host.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace moekit::detail {

struct MoeReferenceConfig {
  int num_experts = 0;  ///< E (ids are checked against it)
  int top_k = 0;
  int64_t hidden = 0, inter = 0;
  float limit = 0.0f;   ///< ≤ 0: no clamp
  int local_offset = 0, local_count = 0;  ///< local_count = E for all experts
  bool round_gu_bf16 = false;             ///< model a bf16 round trip of GEMM1's output
  /// gpt-oss's activation h = g·sigmoid(alpha·g)·(u + 1) (after the clamps) instead of silu(g)·u.
  bool gpt_oss_activation = false;
  float alpha = 1.702f;
};

/// One local expert's weights on the host, SPEC convention (W1 [2I, H] with sW1
/// [ceil(2I/128), ceil(H/128)], W2 [H, I] with sW2 [ceil(H/128), ceil(I/128)]).
struct MoeReferenceExpert {
  const uint8_t* w1 = nullptr;
  const float* sw1 = nullptr;
  const uint8_t* w2 = nullptr;
  const float* sw2 = nullptr;
  const float* b1 = nullptr;  ///< [2I] (gate then up) added to GEMM1's output, or none
  const float* b2 = nullptr;  ///< [H] added to GEMM2's output before the router weight, or none
};

/// Returns local expert e's weights; the pointers need to stay valid only until the next call.
/// Called at most once per expert, in increasing order, and only for experts some slot uses.
using MoeExpertFetch = std::function<MoeReferenceExpert(int local_expert)>;

/// y [T, H] (float64, row-major) for x [T, H] (bf16 bits), topk_ids / topk_weights [T, k].
std::vector<double> moe_reference(const MoeReferenceConfig& c, const uint16_t* x, const int32_t* topk_ids,
                                  const float* topk_weights, int64_t num_tokens, const MoeExpertFetch& fetch);

/// Convenience fetch over host arrays holding all local experts back to back (biases optional:
/// b1 [E, 2I], b2 [E, H]).
MoeExpertFetch moe_reference_fetch_all(const MoeReferenceConfig& c, const uint8_t* w1, const float* sw1,
                                       const uint8_t* w2, const float* sw2, const float* b1 = nullptr,
                                       const float* b2 = nullptr);

}  // namespace moekit::detail
