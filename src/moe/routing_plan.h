// Host side of the routing kernels shared by route() (routing.cu) and the MoE forward's fused
// route + single-CTA sort (route_sort.cu): argument validation and the kernel parameters.
#pragma once
#include <cstdint>

#include "moe/routing_params.h"
#include "moekit/routing.h"

namespace moekit::detail {

struct RoutePlan {
  routing::Params p;  ///< kernel parameters
  int npl = 0;        ///< experts per lane (template argument of the kernels)
  bool sigmoid = false;
  bool bf16 = false;  ///< logits are bf16 (else fp32)
};

/// Experts per lane for E experts: the smallest of {1, 2, 4, 8, 12, 16, 24, 32} with 32 * NPL >= E.
int route_npl(int num_experts);

/// Validates route()'s arguments for num_tokens > 0 (errors name `fn`, as route() documents) and
/// fills the kernel parameters.
RoutePlan plan_route(const RoutingConfig& config, const void* logits, LogitsType logits_type, int64_t num_tokens,
                     int32_t* topk_ids, float* topk_weights, const char* fn);

}  // namespace moekit::detail
