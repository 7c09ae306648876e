// moekit — MoE routing: router logits → top-k expert ids and weights (SPEC §3).
//
// Ties between equal scores go to the lower expert index (and, for group selection, the lower
// group index). All kernels are asynchronous on `stream`, allocate nothing and are
// graph-capturable.
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit {

enum class RoutingMethod {
  kSoftmaxTopk,     ///< p = softmax(logits); top-k of p; optionally renormalized to sum 1
  kTopkSoftmax,     ///< top-k of logits; weights = softmax over the k picked (gpt-oss)
  kSigmoidGrouped,  ///< DeepSeek-V3: sigmoid, bias for selection, group-limited top-k (see SPEC §3)
};

enum class LogitsType { kFloat32, kBFloat16 };

struct RoutingConfig {
  RoutingMethod method = RoutingMethod::kSoftmaxTopk;
  int num_experts = 0;   ///< 1 ≤ E ≤ 1024
  int top_k = 0;         ///< 1 ≤ k ≤ min(E, 32)
  bool renormalize = false;  ///< softmax_topk / sigmoid_grouped: normalize the k weights to sum 1
  // sigmoid_grouped only (the softmax methods reject non-default values rather than ignore them):
  int num_groups = 1;        ///< E % num_groups == 0
  int topk_groups = 1;       ///< groups kept, 1 ≤ topk_groups ≤ num_groups
  float routed_scaling_factor = 1.0f;
  const float* correction_bias = nullptr;  ///< device [E]; null = zeros
};

/// Routes `num_tokens` rows of logits [num_tokens, E] (row stride E) into topk_ids [num_tokens, k]
/// (int32) and topk_weights [num_tokens, k] (fp32), slots ordered by decreasing selection score.
/// Validates the configuration (throws moekit::Error(kInvalidArgument); kMisaligned when logits are
/// not element-aligned or ids/weights/bias not 4-byte aligned); num_tokens == 0 is a no-op.
/// softmax_topk selects on the logits (same order as p in exact arithmetic). NaN scores rank below
/// every number and are picked only when fewer than k non-NaN experts remain; ids are always
/// distinct and in [0, E). Weights follow IEEE arithmetic (a NaN or +Inf logit can make the row's
/// weights NaN). The sigmoid and weight divisions use fast division (≤ 2 ulp).
void route(const RoutingConfig& config, const void* logits, LogitsType logits_type, int64_t num_tokens,
           int32_t* topk_ids, float* topk_weights, cudaStream_t stream);

/// Host reference (float64 internally) of route(): logits as float [num_tokens, E], bias as a host
/// array (or null; config.correction_bias, a device pointer, is ignored here). Same tie rules and
/// slot order.
void route_reference(const RoutingConfig& config, const float* logits, int64_t num_tokens, const float* bias,
                     int32_t* topk_ids, float* topk_weights);

}  // namespace moekit
