// moekit — host reference of MoE routing (routing.h, SPEC §3), float64 internally, and the
// configuration check shared with the GPU entry point (routing.cu).
//
// Selection order, used by every method, for experts, groups and slots alike: a larger score
// first; equal scores → the lower index first; NaN ranks below every number (−Inf included), and
// NaNs among themselves by index. −0 and +0 are equal.
//
// softmax_topk picks the top-k of the logits: softmax is strictly increasing, so this is the
// top-k of p, and it keeps distinct logits distinct where p would round to equal values.
// Weights (m = the largest non-NaN logit of the row, or NaN if there is none; l_j = picked logits):
//   softmax_topk, renormalize = false: w_j = exp(l_j − m) / Σ_{all e} exp(l_e − m)
//   softmax_topk, renormalize = true, and topk_softmax: w_j = exp(l_j − l_0) / Σ_{j'} exp(l_j' − l_0)
//     (p_j / Σ p over the picked is exactly this; l_0 = the first slot = m)
//   sigmoid_grouped: s = 1 / (1 + exp(−l)), b = s + bias, group score = sum of the 2 best b of the
//     group (the b itself for 1-expert groups), the topk_groups best groups are kept, the top-k b
//     among their experts are picked; w_j = s_j [/ Σ_j' s_j'] · routed_scaling_factor.
// IEEE arithmetic throughout, so NaN/Inf propagate exactly as the formulas say: a NaN logit anywhere
// in a row makes all weights of that row NaN for softmax_topk without renormalize (the sum runs over
// all E); otherwise a row's weights are NaN only if a NaN (or an Inf making Inf − Inf) takes part in
// the picked values: e.g. fewer than k non-NaN logits, an +Inf logit, or all picked s = 0 with
// renormalize (0 / 0).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "common/check.h"
#include "moekit/routing.h"

namespace moekit {
namespace detail {

// Limits of route() (one warp per token, at most 32 experts per lane, one slot per lane), applied to
// route_reference() too so that both accept the same configurations.
constexpr int kMaxRoutingExperts = 1024;
constexpr int kMaxRoutingTopK = 32;

// Checks a routing configuration; `fn` names the caller in the message. Shared with routing.cu.
void validate_routing_config(const RoutingConfig& c, const char* fn) {
  const auto kInv = ErrorCode::kInvalidArgument;
  const bool grouped = c.method == RoutingMethod::kSigmoidGrouped;
  MOEKIT_REQUIRE(c.method == RoutingMethod::kSoftmaxTopk || c.method == RoutingMethod::kTopkSoftmax || grouped,
                 kInv, fn, ": unknown routing method ", static_cast<int>(c.method));
  MOEKIT_REQUIRE(c.num_experts >= 1, kInv, fn, ": num_experts = ", c.num_experts, " must be >= 1");
  MOEKIT_REQUIRE(c.num_experts <= kMaxRoutingExperts, kInv, fn, ": num_experts = ", c.num_experts,
                 " exceeds the supported maximum ", kMaxRoutingExperts);
  MOEKIT_REQUIRE(c.top_k >= 1 && c.top_k <= std::min(c.num_experts, kMaxRoutingTopK), kInv, fn,
                 ": top_k = ", c.top_k, " must be in [1, min(num_experts = ", c.num_experts, ", ",
                 kMaxRoutingTopK, ")]");
  if (grouped) {
    MOEKIT_REQUIRE(c.num_groups >= 1 && c.num_experts % c.num_groups == 0, kInv, fn, ": num_groups = ",
                   c.num_groups, " must be >= 1 and divide num_experts = ", c.num_experts);
    MOEKIT_REQUIRE(c.topk_groups >= 1 && c.topk_groups <= c.num_groups, kInv, fn, ": topk_groups = ",
                   c.topk_groups, " must be in [1, num_groups = ", c.num_groups, "]");
    const int group_size = c.num_experts / c.num_groups;
    MOEKIT_REQUIRE(static_cast<int64_t>(c.top_k) <= static_cast<int64_t>(c.topk_groups) * group_size, kInv, fn,
                   ": top_k = ", c.top_k, " exceeds the experts of the kept groups (topk_groups = ",
                   c.topk_groups, " x group size ", group_size, ")");
    MOEKIT_REQUIRE(std::isfinite(c.routed_scaling_factor), kInv, fn, ": routed_scaling_factor = ",
                   c.routed_scaling_factor, " must be finite");
  } else {
    // The grouped-only fields must keep their defaults: a softmax method would silently ignore them.
    MOEKIT_REQUIRE(c.num_groups == 1 && c.topk_groups == 1, kInv, fn, ": num_groups = ", c.num_groups,
                   ", topk_groups = ", c.topk_groups, ": groups are only supported by sigmoid_grouped (use 1, 1)");
    MOEKIT_REQUIRE(c.routed_scaling_factor == 1.0f, kInv, fn, ": routed_scaling_factor = ",
                   c.routed_scaling_factor, " is only supported by sigmoid_grouped (use 1)");
    MOEKIT_REQUIRE(c.correction_bias == nullptr, kInv, fn,
                   ": correction_bias is only supported by sigmoid_grouped (use null)");
  }
}

}  // namespace detail

namespace {

// a ranks before b (index ia < ib breaks ties; NaN last).
bool ranks_before(double a, int ia, double b, int ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na == nb ? ia < ib : nb;
  if (a != b) return a > b;
  return ia < ib;
}

// The n best of `score` over the candidate indices `cand`, in selection order.
std::vector<int> best_n(const std::vector<double>& score, std::vector<int> cand, int n) {
  std::sort(cand.begin(), cand.end(),
            [&](int a, int b) { return ranks_before(score[a], a, score[b], b); });
  cand.resize(static_cast<size_t>(n));
  return cand;
}

}  // namespace

void route_reference(const RoutingConfig& config, const float* logits, int64_t num_tokens, const float* bias,
                     int32_t* topk_ids, float* topk_weights) {
  const char* fn = "moekit::route_reference";
  detail::validate_routing_config(config, fn);
  MOEKIT_REQUIRE(num_tokens >= 0, ErrorCode::kInvalidArgument, fn, ": num_tokens = ", num_tokens,
                 " must be >= 0");
  const bool grouped = config.method == RoutingMethod::kSigmoidGrouped;
  MOEKIT_REQUIRE(grouped || bias == nullptr, ErrorCode::kInvalidArgument, fn,
                 ": bias is only supported by sigmoid_grouped (use null)");
  if (num_tokens == 0) return;
  MOEKIT_REQUIRE(logits != nullptr && topk_ids != nullptr && topk_weights != nullptr,
                 ErrorCode::kInvalidArgument, fn, ": logits, topk_ids and topk_weights must be non-null with num_tokens = ",
                 num_tokens);

  const int E = config.num_experts, k = config.top_k;
  std::vector<int> all(static_cast<size_t>(E));
  std::iota(all.begin(), all.end(), 0);
  std::vector<double> l(static_cast<size_t>(E)), s(static_cast<size_t>(E)), b(static_cast<size_t>(E));

  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int e = 0; e < E; ++e) l[e] = static_cast<double>(logits[t * E + e]);
    std::vector<double> w(static_cast<size_t>(k));
    std::vector<int> pick;

    if (!grouped) {
      pick = best_n(l, all, k);
      if (config.method == RoutingMethod::kSoftmaxTopk && !config.renormalize) {
        double m = std::numeric_limits<double>::quiet_NaN();
        for (int e = 0; e < E; ++e)
          if (!std::isnan(l[e])) m = std::isnan(m) ? l[e] : std::max(m, l[e]);
        double sum = 0.0;
        for (int e = 0; e < E; ++e) sum += std::exp(l[e] - m);
        for (int j = 0; j < k; ++j) w[j] = std::exp(l[pick[j]] - m) / sum;
      } else {
        const double m = l[pick[0]];
        double sum = 0.0;
        for (int j = 0; j < k; ++j) sum += (w[j] = std::exp(l[pick[j]] - m));
        for (int j = 0; j < k; ++j) w[j] /= sum;
      }
    } else {
      for (int e = 0; e < E; ++e) {
        s[e] = 1.0 / (1.0 + std::exp(-l[e]));
        b[e] = s[e] + (bias ? static_cast<double>(bias[e]) : 0.0);
      }
      const int ng = config.num_groups, gsz = E / ng;
      std::vector<int> cand;
      if (config.topk_groups < ng) {
        std::vector<double> gscore(static_cast<size_t>(ng));
        for (int g = 0; g < ng; ++g) {
          std::vector<int> members(static_cast<size_t>(gsz));
          std::iota(members.begin(), members.end(), g * gsz);
          const std::vector<int> top = best_n(b, members, std::min(gsz, 2));
          gscore[g] = gsz == 1 ? b[top[0]] : b[top[0]] + b[top[1]];
        }
        std::vector<int> groups(static_cast<size_t>(ng));
        std::iota(groups.begin(), groups.end(), 0);
        for (int g : best_n(gscore, groups, config.topk_groups))
          for (int e = g * gsz; e < (g + 1) * gsz; ++e) cand.push_back(e);
      } else {
        cand = all;
      }
      pick = best_n(b, cand, k);
      double sum = 0.0;
      for (int j = 0; j < k; ++j) sum += (w[j] = s[pick[j]]);
      for (int j = 0; j < k; ++j) {
        if (config.renormalize) w[j] /= sum;
        w[j] *= static_cast<double>(config.routed_scaling_factor);
      }
    }
    for (int j = 0; j < k; ++j) {
      topk_ids[t * k + j] = pick[j];
      topk_weights[t * k + j] = static_cast<float>(w[j]);
    }
  }
}

}  // namespace moekit
