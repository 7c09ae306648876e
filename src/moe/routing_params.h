// Parameters of the routing kernels (routing.cu, and the fused route + sort in route_sort.cu),
// filled on the host by plan_route (routing_plan.h). Plain data: host and device code include it.
#pragma once
#include <cstdint>

namespace moekit::detail::routing {

enum GroupMode : int { kGroupsAll = 0, kGroupsSegment = 1, kGroupsLocal = 2, kGroupsGeneric = 3 };

struct Params {
  const void* logits;
  const float* bias;  // [E] or null
  int32_t* ids;
  float* weights;
  int64_t num_tokens;
  int num_experts;
  int top_k;
  int vec_bytes;      // logits load width: 16, 8, 4, or 0 = one element at a time
  bool full_softmax;  // softmax_topk without renormalize: weights over the whole row's softmax
  bool renormalize;   // sigmoid_grouped
  float scale;        // sigmoid_grouped: routed_scaling_factor
  int num_groups, group_size, topk_groups;
  int group_mode;     // GroupMode
  int seg_shift;      // kGroupsSegment: log2(lanes per group)
  int smem_words;     // 32-bit words of shared memory per warp (group scores + kept flags)
};

}  // namespace moekit::detail::routing
