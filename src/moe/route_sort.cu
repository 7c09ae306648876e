// moekit — fused routing + single-CTA moe_sort for decode batch sizes (route_sort.h).
//
// At T = 1 the routing kernel and the sort are two launches whose PDL edge (the sort waits for
// the routing grid to finish and flush) costs more than the routing itself (~5.7 µs of the
// deepseek-v3 layer at T = 1, docs/performance.md §Fused route, sort and quantize at small T). Here CTA 0 of the single-CTA sort routes the
// tokens first: warp w < W routes tokens w, w + W, ... with routing::route_token (the very code
// of route_kernel, so ids and weights are the same bits), writes topk_ids / topk_weights to
// global memory as route() does, and lane j < k drops the id of slot j straight into the sort's
// shared-memory key array (small_sort_keep: routed ids are always valid, so the invalid count is
// 0, as moe_sort would find). The -1 fill of the sort (small_sort_begin) runs before the routing
// in the same threads; one __syncthreads, then the sort's count / scan / place phases.
//
// Applies (host rule, sizes only) while T <= kMaxTokens (one token per routing warp; measured),
// T * k and L within the single-CTA sort's limits, E <= 384 (NPL <= 12: the routing code fits the
// 1024-thread CTA's 64 registers, as route_kernel's NPL <= 12 builds do) and the routing warps'
// group scratch fits in kMaxRouteSmem bytes next to the sort's ~45 KB of static shared memory.
//
// With RouteSortQuantize, CTAs after the sort's quantize the tokens token-major (one 128-column
// group pair per warp and unit, the permute kernels' quantize_unit / scatter_unit) and zero the
// accumulator and counters — work that needs no routing, so it runs beside it instead of as a
// kernel of its own between the sort and GEMM1: that kernel's launch and PDL edge measured ~6 µs of
// the deepseek-v3 layer at T = 1 (docs/performance.md §Fused route, sort and quantize at small T).
#include "moe/route_sort.h"

#include <algorithm>

#include "common/check.h"
#include "moe/moe_permute.h"
#include "moe/moe_sort_internal.h"
#include "moe/routing_device.cuh"
#include "moe/quantize_scatter_device.cuh"
#include "moe/routing_plan.h"
#include "moe/small_sort_device.cuh"
#include "moekit/numerics.h"
#include "ptx/ptx.cuh"
#include "runtime/pdl.h"

namespace moekit::detail {
namespace {

// Measured (deepseek-v3, H100, A/B against the unfused route + sort): T = 1 −1.8 µs, T = 2 −1.7,
// T = 8 −0.5, but T = 32 +3 µs and T = 64 +14 µs (one CTA routes the batch serially).
constexpr int64_t kMaxTokens = 8;
constexpr int kMaxNpl = 12;
constexpr size_t kMaxRouteSmem = 3072;
constexpr int kMaxRouteWarps = small_sort::kThreads / 32;

int route_warps(int64_t num_tokens) { return int(std::min<int64_t>(num_tokens, kMaxRouteWarps)); }

template <int NPL, typename T, bool kSigmoid>
__global__ void __maxnreg__(64) route_sort_kernel(const routing::Params rp, const small_sort::Params sp,
                                                  const ScatterParams qp, int warps, unsigned sort_ctas) {
  ptx::griddep_wait();  // PDL (runtime/pdl.h): the logits and x may come from the previous kernel
  ptx::griddep_launch_dependents();
  if (blockIdx.x >= sort_ctas) {  // quantization CTAs (RouteSortQuantize)
    quantize_ctas<small_sort::kThreads>(qp, blockIdx.x - sort_ctas, gridDim.x - sort_ctas);
    return;
  }
  if (blockIdx.x > 0) {
    small_sort::small_sort_helper_fill(sp);
    return;
  }
  __shared__ small_sort::Smem smem;
  extern __shared__ uint32_t route_smem[];
  small_sort::small_sort_begin(sp, smem);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (warp < warps) {
    const routing::GroupScratch scratch =
        routing::group_scratch<kSigmoid>(rp, route_smem + warp * rp.smem_words, lane * NPL);
    for (int t = warp; t < int(rp.num_tokens); t += warps) {
      const int id = routing::route_token<NPL, T, kSigmoid>(rp, t, scratch, lane);
      if (lane < rp.top_k) small_sort::small_sort_keep(sp, smem, t * rp.top_k + lane, id);
    }
  }
  __syncthreads();
  small_sort::small_sort_finish(sp, smem);
}

struct Launch {
  const routing::Params& rp;
  const small_sort::Params& sp;
  const ScatterParams& qp;
  unsigned quant_ctas;
  int warps;
  size_t smem;
  cudaStream_t stream;
};

template <int NPL, typename T, bool kSigmoid>
void launch(const Launch& l) {
  const unsigned sort_ctas = small_sort_grid(l.sp);
  launch_pdl(route_sort_kernel<NPL, T, kSigmoid>, dim3(sort_ctas + l.quant_ctas), dim3(small_sort::kThreads), l.smem,
             l.stream, l.rp, l.sp, l.qp, l.warps, sort_ctas);
}

template <typename T, bool kSigmoid>
void dispatch_npl(int npl, const Launch& l) {
  switch (npl) {
    case 1: return launch<1, T, kSigmoid>(l);
    case 2: return launch<2, T, kSigmoid>(l);
    case 4: return launch<4, T, kSigmoid>(l);
    case 8: return launch<8, T, kSigmoid>(l);
    case 12: return launch<12, T, kSigmoid>(l);
    default: throw_error(ErrorCode::kInternal, concat("moekit::detail::moe_route_sort: no kernel for NPL = ", npl));
  }
}

// Group scratch words per routing warp (as plan_route computes them).
int group_words(const RoutingConfig& c) {
  if (c.method != RoutingMethod::kSigmoidGrouped || c.topk_groups >= c.num_groups) return 0;
  return c.num_groups + (c.num_groups + 3) / 4;
}

}  // namespace

unsigned fused_quantize_params(const char* fn, const RouteSortQuantize& q, int64_t num_tokens, ScatterParams& qp) {
  if (!scatter_params(fn, q.x, num_tokens, q.hidden, 1, nullptr, num_tokens, q.xq, q.sx, q.zero_acc, q.zero_u32,
                      q.num_zero_u32, qp))
    return 0;
  set_scatter_unroll(qp, num_tokens, 1);  // the most units: at T = 8, H = 7168 eight tokens of 28 each
  const int64_t ctas = std::min<int64_t>(ceil_div(qp.units, int64_t{small_sort::kThreads / 32}), 64);
  return static_cast<unsigned>(std::max<int64_t>(ctas, 1));  // the counters are zeroed by the first
}

bool moe_route_sort_applies(const RoutingConfig& config, int64_t num_tokens, int local_count) {
  if (num_tokens < 1 || num_tokens > kMaxTokens) return false;
  if (config.top_k < 1 || num_tokens * config.top_k > small_sort::kMaxSlots) return false;
  if (local_count > small_sort::kMaxExperts) return false;
  if (config.num_experts < 1 || route_npl(config.num_experts) == 0 || route_npl(config.num_experts) > kMaxNpl)
    return false;
  return size_t(route_warps(num_tokens)) * size_t(group_words(config)) * 4 <= kMaxRouteSmem;
}

void moe_route_sort(const RoutingConfig& config, const void* logits, LogitsType logits_type, int64_t num_tokens,
                    int32_t* topk_ids, float* topk_weights, int num_experts_total, int local_offset, int local_count,
                    const MoeSortBuffers& out, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                    const RouteSortQuantize* quantize) {
  constexpr const char* fn = "moekit::detail::moe_route_sort";
  MOEKIT_REQUIRE(moe_route_sort_applies(config, num_tokens, local_count), ErrorCode::kInvalidArgument, fn,
                 ": not applicable to num_tokens = ", num_tokens, ", local_count = ", local_count,
                 " with this routing configuration (see moe_route_sort_applies)");
  const RoutePlan plan = plan_route(config, logits, logits_type, num_tokens, topk_ids, topk_weights, fn);
  MOEKIT_REQUIRE(config.num_experts == num_experts_total, ErrorCode::kInvalidArgument, fn,
                 ": routing.num_experts = ", config.num_experts, " != num_experts_total = ", num_experts_total);
  const int64_t n = moe_sort_validate(fn, topk_ids, num_tokens, config.top_k, num_experts_total, local_offset,
                                      local_count, out, workspace, workspace_bytes);
  const small_sort::Params sp = small_sort_params(topk_ids, n, num_experts_total, local_offset, local_count, out);
  ScatterParams qp{};
  const unsigned quant_ctas = quantize ? fused_quantize_params(fn, *quantize, num_tokens, qp) : 0u;
  const int warps = route_warps(num_tokens);
  const Launch l{plan.p, sp, qp, quant_ctas, warps, size_t(warps) * size_t(plan.p.smem_words) * 4, stream};
  if (!plan.bf16) {
    if (plan.sigmoid) dispatch_npl<float, true>(plan.npl, l);
    else dispatch_npl<float, false>(plan.npl, l);
  } else {
    if (plan.sigmoid) dispatch_npl<uint16_t, true>(plan.npl, l);
    else dispatch_npl<uint16_t, false>(plan.npl, l);
  }
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit::detail
