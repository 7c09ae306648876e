// moekit — MoE routing kernels: router logits → top-k expert ids and weights (routing.h, SPEC §3).
//
// Semantics (shared with route_reference(), see routing_reference.cpp for the formulas):
//   * Selection order: larger score first, equal scores → lower index, NaN below every number (−Inf
//     included; NaNs among themselves by index), −0 == +0. The same order ranks groups.
//   * softmax_topk selects on the logits (softmax is strictly increasing, so this is the top-k of p
//     without the ties that rounding p to fp32 would create); topk_softmax likewise.
//   * sigmoid_grouped selects on b = s + bias computed in fp32, s = 1 / (1 + expf(−l)) with the
//     fast fp32 reciprocal (a few ulp in all): two experts whose fp32 b are equal are tied even
//     where float64 would separate them (e.g. s saturates to 1.0f for logits above ~17). Group
//     score = fp32 sum of the group's two best b.
//   * Weights in fp32 with expf and __fdividef (a few ulp; the float64 reference agrees to ~1e-6).
//   * Ids are always in [0, E) and distinct within a token: NaN logits rank last, so a NaN expert
//     is picked only when fewer than k non-NaN candidates remain. NaN/Inf reach the weights exactly
//     as the IEEE formulas say (e.g. softmax_topk without renormalize: a NaN anywhere in the row
//     makes the row's weights NaN; an +Inf logit gives Inf − Inf = NaN weights).
//   * Limits: E ≤ 1024 (≤ 32 experts per lane), k ≤ 32 (one slot per lane).
//
// Design: one warp per token (4 warps per 128-thread CTA, grid-stride over tokens). Lane l owns
// the NPL consecutive experts [l·NPL, l·NPL + NPL), NPL ∈ {1, 2, 4, 8, 12, 16, 24, 32} the
// smallest with 32·NPL ≥ E (E = 256 → 8, E = 384 → 12), in registers. Logits are loaded with
// 16-, 8- or 4-byte vector loads when the pointer, E and NPL allow it (chosen on the host), else
// element by element. Each expert's selection score becomes a 32-bit order key (NaN → 1, expert
// not selectable → 0), so every comparison is an unsigned integer compare. Top-k: k rounds of a
// warp argmax. Each lane keeps its best key (the first of equal keys, i.e. the lowest index);
// a round is __reduce_max_sync of those keys, a ballot of the lanes holding the maximum, the lowest
// such lane (lanes own increasing expert ranges, so that is the lowest expert index among equal
// keys) and one shuffle for its register slot (two for sigmoid_grouped: s too). The owning lane
// clears the winner and rescans its NPL keys. Lane j keeps slot j; the weights are computed by
// lanes < k at the end (one warp sum) and stored coalesced.
// sigmoid_grouped with topk_groups < num_groups: group scores (top-2 of b in key space) are
// computed in one of three ways picked on the host from the group size G:
//   segment: G a multiple of NPL, G / NPL = S a power of two → each lane is inside one group;
//            log2(S) xor-shuffle top-2 merges in aligned segments of S lanes (E = 256, 8 groups:
//            NPL = 8, S = 4, two steps for all groups at once);
//   local:   NPL a multiple of G → a lane holds whole groups and scores them alone;
//   generic: anything else → one warp-wide top-2 reduction per group.
// The scores go to shared memory (per warp: num_groups keys + num_groups kept flags); lane g
// ranks group g against all groups (broadcast reads), and experts of dropped groups get key 0.
// With topk_groups == num_groups (e.g. kimi-k2's single group) the group step is skipped.
#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "common/check.h"
#include "moe/routing_device.cuh"
#include "moe/routing_plan.h"
#include "moekit/routing.h"
#include "ptx/ptx.cuh"
#include "runtime/pdl.h"

namespace moekit {
namespace detail {
// routing_reference.cpp: the configuration check shared by route() and route_reference().
void validate_routing_config(const RoutingConfig& c, const char* fn);
}  // namespace detail

namespace {

using namespace detail::routing;

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 32 * kWarpsPerBlock;
constexpr int64_t kMaxGrid = int64_t{1} << 20;  // CTAs; grid-stride beyond

// ---------------------------------------------------------------------------------------------
// Kernel
// ---------------------------------------------------------------------------------------------

// CTAs per SM promised to ptxas: it then budgets 65536 / (128 · n) registers per thread (64 up to
// NPL = 12, 85, 128, 170). Without it ptxas picked ~56 registers and spilled a few words at NPL = 12.
constexpr int min_ctas_per_sm(int npl) { return npl <= 12 ? 8 : npl <= 16 ? 6 : npl <= 24 ? 4 : 3; }

template <int NPL, typename T, bool kSigmoid>
__global__ void __launch_bounds__(kThreads, min_ctas_per_sm(NPL)) route_kernel(const Params p) {
  ptx::griddep_wait();  // PDL (runtime/pdl.h): the logits may come from the previous kernel
  ptx::griddep_launch_dependents();
  extern __shared__ uint32_t smem[];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const GroupScratch scratch = group_scratch<kSigmoid>(p, smem + warp * p.smem_words, lane * NPL);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp; t < p.num_tokens; t += stride)
    route_token<NPL, T, kSigmoid>(p, t, scratch, lane);
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------

constexpr int kNplChoices[] = {1, 2, 4, 8, 12, 16, 24, 32};

template <int NPL, typename T, bool kSigmoid>
void launch(const Params& p, int grid, size_t smem, cudaStream_t stream) {
  detail::launch_pdl(route_kernel<NPL, T, kSigmoid>, dim3(grid), dim3(kThreads), smem, stream, p);
}

template <typename T, bool kSigmoid>
void dispatch_npl(int npl, const Params& p, int grid, size_t smem, cudaStream_t stream) {
  switch (npl) {
    case 1: return launch<1, T, kSigmoid>(p, grid, smem, stream);
    case 2: return launch<2, T, kSigmoid>(p, grid, smem, stream);
    case 4: return launch<4, T, kSigmoid>(p, grid, smem, stream);
    case 8: return launch<8, T, kSigmoid>(p, grid, smem, stream);
    case 12: return launch<12, T, kSigmoid>(p, grid, smem, stream);
    case 16: return launch<16, T, kSigmoid>(p, grid, smem, stream);
    case 24: return launch<24, T, kSigmoid>(p, grid, smem, stream);
    case 32: return launch<32, T, kSigmoid>(p, grid, smem, stream);
    default:
      detail::throw_error(ErrorCode::kInternal, detail::concat("moekit::route: no kernel for NPL = ", npl));
  }
}

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

namespace detail {

int route_npl(int num_experts) {
  for (int n : kNplChoices)
    if (32 * n >= num_experts) return n;
  return 0;  // E > 1024: rejected by validation
}

RoutePlan plan_route(const RoutingConfig& config, const void* logits, LogitsType logits_type, int64_t num_tokens,
                     int32_t* topk_ids, float* topk_weights, const char* fn) {
  const auto kInv = ErrorCode::kInvalidArgument;
  validate_routing_config(config, fn);
  MOEKIT_REQUIRE(logits_type == LogitsType::kFloat32 || logits_type == LogitsType::kBFloat16, kInv, fn,
                 ": unknown logits type ", static_cast<int>(logits_type));
  MOEKIT_REQUIRE(logits != nullptr, kInv, fn, ": logits is null with num_tokens = ", num_tokens);
  MOEKIT_REQUIRE(topk_ids != nullptr, kInv, fn, ": topk_ids is null with num_tokens = ", num_tokens);
  MOEKIT_REQUIRE(topk_weights != nullptr, kInv, fn, ": topk_weights is null with num_tokens = ", num_tokens);
  const size_t elem = logits_type == LogitsType::kFloat32 ? 4 : 2;
  const auto addr = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  MOEKIT_REQUIRE(addr(logits) % elem == 0, ErrorCode::kMisaligned, fn, ": logits (", logits,
                 ") must be aligned to its element size ", elem);
  MOEKIT_REQUIRE(addr(topk_ids) % 4 == 0 && addr(topk_weights) % 4 == 0, ErrorCode::kMisaligned, fn,
                 ": topk_ids and topk_weights must be 4-byte aligned");
  MOEKIT_REQUIRE(addr(config.correction_bias) % 4 == 0, ErrorCode::kMisaligned, fn,
                 ": correction_bias must be 4-byte aligned");

  const int E = config.num_experts;
  const int npl = route_npl(E);
  const bool sigmoid = config.method == RoutingMethod::kSigmoidGrouped;

  RoutePlan plan;
  plan.npl = npl;
  plan.sigmoid = sigmoid;
  plan.bf16 = logits_type == LogitsType::kBFloat16;
  routing::Params& p = plan.p;
  p = routing::Params{};
  p.logits = logits;
  p.bias = config.correction_bias;
  p.ids = topk_ids;
  p.weights = topk_weights;
  p.num_tokens = num_tokens;
  p.num_experts = E;
  p.top_k = config.top_k;
  p.vec_bytes = 0;
  for (int vb : {16, 8, 4}) {
    const int v = vb / static_cast<int>(elem);
    if (v >= 2 && npl % v == 0 && E % v == 0 && addr(logits) % vb == 0) {
      p.vec_bytes = vb;
      break;
    }
  }
  p.full_softmax = config.method == RoutingMethod::kSoftmaxTopk && !config.renormalize;
  p.renormalize = config.renormalize;
  p.scale = sigmoid ? config.routed_scaling_factor : 1.0f;
  p.num_groups = sigmoid ? config.num_groups : 1;
  p.group_size = E / p.num_groups;
  p.topk_groups = sigmoid ? config.topk_groups : 1;
  p.group_mode = routing::kGroupsAll;
  p.seg_shift = 0;
  p.smem_words = 0;
  if (sigmoid && p.topk_groups < p.num_groups) {
    const int G = p.group_size;
    if (G % npl == 0 && is_pow2(G / npl) && G / npl <= 32) {
      p.group_mode = routing::kGroupsSegment;
      while ((1 << p.seg_shift) < G / npl) ++p.seg_shift;
    } else if (npl % G == 0) {
      p.group_mode = routing::kGroupsLocal;
    } else {
      p.group_mode = routing::kGroupsGeneric;
    }
    p.smem_words = p.num_groups + (p.num_groups + 3) / 4;  // keys + kept bytes
  }
  return plan;
}

}  // namespace detail

void route(const RoutingConfig& config, const void* logits, LogitsType logits_type, int64_t num_tokens,
           int32_t* topk_ids, float* topk_weights, cudaStream_t stream) {
  const char* fn = "moekit::route";
  MOEKIT_REQUIRE(num_tokens >= 0, ErrorCode::kInvalidArgument, fn, ": num_tokens = ", num_tokens, " must be >= 0");
  if (num_tokens == 0) {
    detail::validate_routing_config(config, fn);
    return;
  }
  const detail::RoutePlan plan = detail::plan_route(config, logits, logits_type, num_tokens, topk_ids, topk_weights, fn);
  const Params& p = plan.p;
  const size_t smem = static_cast<size_t>(p.smem_words) * 4 * kWarpsPerBlock;  // ≤ 20 KiB
  const int grid = static_cast<int>(std::min<int64_t>((num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxGrid));
  if (!plan.bf16) {
    if (plan.sigmoid) dispatch_npl<float, true>(plan.npl, p, grid, smem, stream);
    else dispatch_npl<float, false>(plan.npl, p, grid, smem, stream);
  } else {
    if (plan.sigmoid) dispatch_npl<uint16_t, true>(plan.npl, p, grid, smem, stream);
    else dispatch_npl<uint16_t, false>(plan.npl, p, grid, smem, stream);
  }
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit
