// describe_moe_plan (moe_plan.h): the plan as text for `moekit bench moe --explain`.
#include <string>

#include "common/check.h"
#include "planning/moe_plan.h"

namespace moekit::detail {
namespace {

const char* on_off(bool b) { return b ? "on" : "off"; }

std::string routing_line(const MoePlan& p) {
  if (!p.from_logits) return "caller's top-k ids";
  return p.route_sort ? "from logits, fused with the single-CTA sort (moe_route_sort, one launch)"
                      : "from logits (route), then the sort";
}

std::string sort_line(const MoePlan& p) {
  const char* quantize = p.quantize_in_sort ? ", which also quantizes the tokens" : "";
  if (p.route_sort) return concat("in the routing launch", quantize);
  return concat(p.sort_single_cta ? "single CTA (one launch)" : "radix (memset, classify, cub, scan, fill)", quantize);
}

std::string activations_line(const MoePlan& p) {
  if (p.gather) {
    if (p.prequantized) return "quantized by the caller (expert-parallel rows), GEMM1 gathers its rows by token";
    return concat("quantized once per token ", p.quantize_in_sort ? "in the sort's launch" : "(quantize_tokens)",
                  ", GEMM1 gathers its rows by token");
  }
  if (p.prequantized) return "quantized by the caller (expert-parallel rows), copied per slot (gather_rows)";
  return concat("permuted copy per slot (permute_quantize), token-major scales gathered by row: ",
                on_off(p.permute_token_scales));
}

// MXFP4 weights: the raw slots that stream them (kernels/sm90/mxfp4_loader.cuh), and whether the
// decode GEMM runs them (mxfp4_decode_gemm.cuh: BLOCK_M tokens x BLOCK_N weight rows, A stages).
std::string mx_text(int mx_stages, bool decode, bool stream_k = false, int k_groups = 1) {
  if (!mx_stages) return std::string();
  return concat("  mxfp4 raw slots ", mx_stages, decode ? "  decode GEMM (m = tokens per tile, weights as MMA A)" : "",
                stream_k ? ", stream-K (equal K-block shares per CTA)" : "",
                k_groups > 1 ? concat(", ", k_groups, " K groups per tile") : std::string());
}

std::string gemm1_line(const MoeGemm1Plan& g) {
  return concat(g.config.str(), "  promote_k ", g.promote_k,
                "  tail_split ", g.config.multicast == 2 ? on_off(g.pair_tail_split) : "n/a (single CTAs)",
                "  scheduling ", g.dynamic ? (g.one_pass ? "dynamic, one pass" : "dynamic") : "static",
                "  a_box_rows ", g.a_box_rows ? std::to_string(g.a_box_rows) : std::string("BLOCK_M"),
                "  pdl_early ", on_off(g.pdl_early), mx_text(g.mx_stages, g.mx_decode, g.stream_k, g.k_groups));
}

std::string gemm2_line(const MoeGemm2Plan& g) {
  if (g.rows_then_combine)
    return concat("bf16 rows (grouped contiguous GEMM) + ordered combine: ", g.config.str(), "  scheduling ",
                  g.dynamic ? "dynamic" : "static", mx_text(g.mx_stages, false));
  return concat("FP32 scatter-add into y_acc + finalize: ", g.config.str(), "  scheduling ",
                g.dynamic ? "dynamic" : "static", "  a_box_rows ",
                g.a_box_rows ? std::to_string(g.a_box_rows) : std::string("BLOCK_M"),
                mx_text(g.mx_stages, g.mx_decode, g.stream_k, g.k_groups));
}

}  // namespace

std::string describe_moe_plan(const MoePlan& p) {
  const MoeConfig& c = p.layer;
  std::string s = concat("T = ", p.num_tokens, "  (E ", c.num_experts, ", k ", c.top_k, ", H ", c.hidden, ", I ",
                         c.inter, ", local experts ", c.local_count, "; GEMM limits: ", p.limits.num_sms, " SMs, ",
                         p.limits.smem_bytes, " B shared memory)\n");
  const auto line = [&s](const char* key, const std::string& value) { s += concat("  ", key, value, "\n"); };
  if (!p.fused_layout) {
    line("layout       ", "unfused (I % 64 != 0): route / sort / permute, grouped GEMM1, SwiGLU, grouped GEMM2, combine");
    line("routing      ", routing_line(p));
    return s;
  }
  if (p.num_tokens < 1) {
    line("layout       ", "fused; T = 0 launches nothing");
    return s;
  }
  line("layout       ", "fused (prepared W1, GEMM1 + SwiGLU + requant in one kernel)");
  line("weights      ", c.weight_format == MoeWeightFormat::kMxfp4
                            ? "MXFP4 (4-bit codes streamed, expanded to E4M3 in shared memory)"
                            : "FP8 E4M3, 128 x 128 block scales");
  line("activation   ", c.activation == MoeActivation::kGptOss
                            ? concat("gpt-oss: g * sigmoid(", c.activation_alpha, " g) * (u + 1), limit ", c.limit)
                            : (c.limit > 0 ? concat("silu(g) * u, limit ", c.limit) : std::string("silu(g) * u")));
  line("routing      ", routing_line(p));
  line("sort         ", sort_line(p));
  line("activations  ", activations_line(p));
  line("load         ", concat(p.load.active, " active local experts x ", p.load.rows_per_active,
                               " rows expected; ", p.rows, " permuted rows bound"));
  line("gemm1        ", gemm1_line(p.gemm1));
  line("gemm2        ", gemm2_line(p.gemm2));
  line("workspace    ", concat(p.workspace.bytes, " bytes (moe_sort scratch ", p.workspace.sort_scratch_bytes, ")"));
  return s;
}

}  // namespace moekit::detail
