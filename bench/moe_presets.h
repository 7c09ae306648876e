// The SPEC §5 model presets of `moekit bench moe`, and the layer configuration each one runs.
#pragma once
#include <cstdint>
#include <vector>

#include "moekit/moe_layer.h"
#include "moekit/routing.h"

namespace moekit::bench {

struct Preset {
  const char* name;
  int e, k;
  int64_t h, inter;
  RoutingMethod method;
  bool renormalize;
  int groups, topk_groups;
  float scale, limit;
  /// gpt-oss's layer (SPEC §6): its activation (MoeActivation::kGptOss) and biases b1, b2.
  bool gpt_oss = false;
};

// SPEC §5.
inline const Preset kPresets[] = {
    {"deepseek-v3", 256, 8, 7168, 2048, RoutingMethod::kSigmoidGrouped, true, 8, 4, 2.5f, 0.0f},
    {"kimi-k2", 384, 8, 7168, 2048, RoutingMethod::kSigmoidGrouped, true, 1, 1, 2.827f, 0.0f},
    {"qwen3-235b-a22b", 128, 8, 4096, 1536, RoutingMethod::kSoftmaxTopk, true, 1, 1, 1.0f, 0.0f},
    {"qwen3-30b-a3b", 128, 8, 2048, 768, RoutingMethod::kSoftmaxTopk, true, 1, 1, 1.0f, 0.0f},
    {"mixtral-8x7b", 8, 2, 4096, 14336, RoutingMethod::kSoftmaxTopk, true, 1, 1, 1.0f, 0.0f},
    {"gpt-oss-120b", 128, 4, 2880, 2880, RoutingMethod::kTopkSoftmax, false, 1, 1, 1.0f, 7.0f, true},
    {"deepseek-v2-lite", 64, 6, 2048, 1408, RoutingMethod::kSoftmaxTopk, false, 1, 1, 1.0f, 0.0f},
    // SPEC §5's shape presets beside the table: gpt-oss-20b as 120b with 32 experts; DeepSeek-V4-Flash
    // (sigmoid routing with bias, one group; its routed scaling is not given, 1 here).
    {"gpt-oss-20b", 32, 4, 2880, 2880, RoutingMethod::kTopkSoftmax, false, 1, 1, 1.0f, 7.0f, true},
    {"deepseek-v4-flash", 256, 6, 4096, 2048, RoutingMethod::kSigmoidGrouped, true, 1, 1, 1.0f, 0.0f},
};

/// The layer configuration of preset `p` (routing from logits; `correction_bias`: the
/// sigmoid_grouped presets' device bias, may be null) with the bench's GEMM1 options.
MoeConfig preset_moe_config(const Preset& p, int promote_k, MoeGemm1Input gemm1_input,
                            const float* correction_bias);

/// `moekit bench moe --explain`: prints the forward's plan (planning/moe_plan.h) for every preset
/// and T, for the current GPU's limits or, without one, the H100's (`mxfp4`: MXFP4 expert weights).
/// Returns the exit status.
int explain_moe_plans(const std::vector<const Preset*>& presets, const std::vector<int64_t>& tokens, int promote_k,
                      MoeGemm1Input gemm1_input, bool mxfp4 = false);

}  // namespace moekit::bench
