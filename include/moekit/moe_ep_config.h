// moekit — the configuration and per-call arguments of the expert-parallel MoE layer
// (moekit::MoeEpLayer, include/moekit/moe_ep_layer.h). Separate from the layer so that code
// without NCCL (the planning module and its CPU tests) can read them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "moekit/moe_layer.h"

namespace moekit {

/// How tokens travel between ranks (include/moekit/moe_ep_layer.h describes both).
enum class MoeEpMode { kLowLatency, kHighThroughput };

/// Configuration of the expert-parallel layer.
struct MoeEpConfig {
  /// The whole model's layer: num_experts = E of the model, routing as for MoeLayer.
  /// local_offset / local_count must be 0 (they follow from the rank); gemm1_input kAuto or
  /// kGathered (FP8 weights: the received rows are read in place).
  MoeConfig layer;
  MoeEpMode mode = MoeEpMode::kLowLatency;
  /// Every rank's num_tokens is at most this (≥ 1). kLowLatency sends this many rows per rank
  /// whatever T is; both modes size their buffers by it (workspace_size).
  int64_t max_tokens_per_rank = 0;
};

/// One rank's inputs and outputs (device pointers on the rank's device).
struct MoeEpForwardArgs {
  int64_t num_tokens = 0;   ///< this rank's T, 0 ≤ T ≤ max_tokens_per_rank (ranks may differ)
  const void* x = nullptr;  ///< bf16 [T, H], 16-byte aligned
  void* y = nullptr;        ///< bf16 [T, H], fully written; 16-byte aligned, no overlap with x or the workspace
  /// Routing as MoeLayer: logits [T, E] (requires MoeConfig::routing) or topk_ids / topk_weights [T, k].
  const void* logits = nullptr;
  LogitsType logits_type = LogitsType::kFloat32;
  const int32_t* topk_ids = nullptr;      ///< −1 = no expert; ids outside [−1, E) are counted and dropped
  const float* topk_weights = nullptr;
  int32_t* invalid_count = nullptr;       ///< optional: set to this rank's slots with an id outside [−1, E)
  void* workspace = nullptr;              ///< 256-byte aligned, ≥ workspace_size() bytes
  size_t workspace_bytes = 0;
};

}  // namespace moekit
