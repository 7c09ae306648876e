// `moekit bench moe --explain` (moe_presets.h) and the presets' layer configurations.
#include <cstdio>
#include <exception>

#include "bench/moe_presets.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "moekit/moe_sort.h"
#include "planning/moe_plan.h"
#include "runtime/device.h"
#include "runtime/knobs.h"

namespace moekit::bench {

MoeConfig preset_moe_config(const Preset& p, int promote_k, MoeGemm1Input gemm1_input,
                            const float* correction_bias) {
  RoutingConfig rc;
  rc.method = p.method;
  rc.num_experts = p.e;
  rc.top_k = p.k;
  rc.renormalize = p.renormalize;
  if (p.method == RoutingMethod::kSigmoidGrouped) {
    rc.num_groups = p.groups;
    rc.topk_groups = p.topk_groups;
    rc.routed_scaling_factor = p.scale;
    rc.correction_bias = correction_bias;
  }
  MoeConfig cfg;
  cfg.num_experts = p.e;
  cfg.top_k = p.k;
  cfg.hidden = p.h;
  cfg.inter = p.inter;
  cfg.routing = rc;
  cfg.limit = p.limit;
  cfg.gemm1_promote_k = promote_k;
  cfg.gemm1_input = gemm1_input;
  if (p.gpt_oss) cfg.activation = MoeActivation::kGptOss;
  return cfg;
}

int explain_moe_plans(const std::vector<const Preset*>& presets, const std::vector<int64_t>& tokens, int promote_k,
                      MoeGemm1Input gemm1_input, bool mxfp4) {
  const bool gpu = detail::gpu_available();
  const detail::GemmDeviceLimits limits = gpu ? detail::device_limits() : detail::GemmDeviceLimits{};
  if (gpu) {
    std::printf("# MoE forward plans (routing from logits) for this GPU's limits: %d SMs, %u B shared memory\n",
                limits.num_sms, limits.smem_bytes);
  } else {
    std::printf("# MoE forward plans (routing from logits) for the H100's limits (no GPU visible): %d SMs, %u B shared "
                "memory; workspace bytes leave out moe_sort's scratch (its size needs the device)\n",
                limits.num_sms, limits.smem_bytes);
  }
  try {
    for (const Preset* p : presets) {
      MoeConfig given = preset_moe_config(*p, promote_k, gemm1_input, nullptr);
      if (mxfp4) given.weight_format = MoeWeightFormat::kMxfp4;
      const MoeConfig cfg = MoeLayer(given).config();
      std::printf("\n== %s ==\n", p->name);
      for (int64_t t : tokens) {
        const size_t sort_scratch = gpu && t > 0 && detail::moe_fused_layout(cfg.inter)
                                        ? moe_sort_workspace_size(t, cfg.top_k, cfg.local_count)
                                        : 0;
        const detail::MoePlan plan = detail::plan_moe_forward(cfg, t, true, limits, sort_scratch, detail::knobs());
        std::printf("%s", detail::describe_moe_plan(plan).c_str());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moekit bench moe --explain: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace moekit::bench
