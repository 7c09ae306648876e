// Internal MoE forward (moe_forward.h).
//
// Fused path (I % 64 == 0, the default):
//   [route →] moe_sort (routing from logits at T <= 8: one fused launch, route_sort.h) →
//   permute_quantize_by_token, or (gather variant, moe_gemm1_gather) quantize_tokens — either also
//   zeroes y_acc and the tile counters; with the fused route + sort, or the single-CTA sort of
//   callers' top-k ids (moe_sort_quantize), the tokens are quantized in that same launch (gather
//   variant) → moe_gemm1_swiglu (GEMM1 + SwiGLU + FP8 requant in the
//   epilogue: h never leaves the chip in bf16; A from the permuted copy or gathered by token) →
//   moe_gemm2_scatter
//   (GEMM2 + router weight + FP32 vector-atomic scatter-add into y_acc [T, H]) → finalize
//   (y = bf16(y_acc)).
//   The caller (MoeLayer::forward) runs it in a PdlScope: every kernel of this chain is launched
//   with programmatic dependent launch (runtime/pdl.h), so each launch and prologue overlaps the
//   previous kernel; the permute quantizes its first tokens and the GEMMs find their first tile
//   before waiting for their predecessor.
//   A token's k contributions are summed in FP32 in an unspecified order (atomics), so the last
//   bit of y can differ between runs.
// Deterministic mode, and any T whose y_acc would not fit in L2 (T * H * 4 > 16 MiB): GEMM2 writes
//   its rows in bf16 (grouped GEMM) and moe_combine sums each token's slots in slot order in FP32
//   — bit-identical run to run.
// I % 64 != 0 (rare): the unfused pipeline (moe_unfused.cpp) on an unprepared copy of W1.
// Which of these runs, and how, is the plan's (planning/moe_plan.h); this file only executes it.
#include "moe/moe_forward.h"

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "moe/moe_combine_bias.h"
#include "moe/moe_gemm.h"
#include "moe/moe_permute.h"
#include "moe/moe_sort_internal.h"
#include "moe/moe_stage_trace.h"
#include "moe/route_sort.h"
#include "moe/moe_unfused.h"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_ops.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"

namespace moekit::detail {
namespace {

// The workspace regions of a fused forward, at the plan's offsets.
struct Regions {
  MoeSortBuffers sort;  // invalid_count is the caller's
  void* sort_scratch;
  uint8_t* a_perm;
  float* sa_perm;
  uint8_t* hq;
  float* sh;
  float* y_acc;         // scatter-add GEMM2
  uint16_t* d2;         // rows GEMM2 (the same bytes)
  unsigned* counters;   // [kMoeTileCounters] zeroed by the permute: GEMM1's and GEMM2's tile counters, stream-K flags
  float* sk_partials;   // GEMM1's stream-K partial sums
  float* sx_tokens;     // [T, ceil(H/128)]: the permute's token-major scales (TokenScales)
};

Regions regions(char* base, const MoeWorkspacePlan& w) {
  Regions r{};
  r.sort.expert_counts = reinterpret_cast<int32_t*>(base + w.expert_counts);
  r.sort.expert_offsets = reinterpret_cast<int32_t*>(base + w.expert_offsets);
  r.sort.permuted_to_expanded = reinterpret_cast<int32_t*>(base + w.permuted_to_expanded);
  r.sort.expanded_to_permuted = reinterpret_cast<int32_t*>(base + w.expanded_to_permuted);
  r.sort_scratch = base + w.sort_scratch;
  r.a_perm = reinterpret_cast<uint8_t*>(base + w.a_perm);
  r.sa_perm = reinterpret_cast<float*>(base + w.sa_perm);
  r.hq = reinterpret_cast<uint8_t*>(base + w.hq);
  r.sh = reinterpret_cast<float*>(base + w.sh);
  r.y_acc = reinterpret_cast<float*>(base + w.gemm2_out);
  r.d2 = reinterpret_cast<uint16_t*>(base + w.gemm2_out);
  r.counters = reinterpret_cast<unsigned*>(base + w.tile_counters);
  r.sk_partials = reinterpret_cast<float*>(base + w.stream_k_partials);
  r.sx_tokens = reinterpret_cast<float*>(base + w.token_scales);
  return r;
}

}  // namespace

MoePreparedSizes moe_prepared_sizes(int num_experts, int64_t hidden, int64_t inter, MoeWeightFormat format) {
  MoePreparedSizes s;
  const int64_t kbh = ceil_div(hidden, kQuantBlock);
  if (format == MoeWeightFormat::kMxfp4) {  // always the fused layout (I % 64 == 0, H % 32 == 0)
    const int64_t rows_p = moe_prepared_w1_rows(inter), kbi = ceil_div(inter, kQuantBlock);
    s.w1_bytes = size_t(moe_mxfp4_weight_bytes(num_experts, rows_p, hidden));
    s.sw1_bytes = size_t(num_experts) * size_t(rows_p / 64) * size_t(kbh) * sizeof(float);
    s.sw1_blocks_bytes = size_t(num_experts) * size_t(ceil_div(2 * inter, kQuantBlock)) * size_t(kbh) * sizeof(float);
    s.w2_bytes = size_t(moe_mxfp4_weight_bytes(num_experts, hidden, inter));
    s.sw2_bytes = size_t(num_experts) * size_t(ceil_div(hidden, kQuantBlock)) * size_t(kbi) * sizeof(float);
  }
  if (moe_fused_layout(inter)) {
    s.b1_bytes = size_t(num_experts) * size_t(2 * inter) * sizeof(float);
    s.b2_bytes = size_t(num_experts) * size_t(hidden) * sizeof(float);
  }
  if (format == MoeWeightFormat::kMxfp4) return s;
  if (moe_fused_layout(inter)) {
    const int64_t rows_p = moe_prepared_w1_rows(inter);
    // K-block tiled (moe_weights.cu): K padded to whole 128-byte K blocks.
    s.w1_bytes = static_cast<size_t>(num_experts) * size_t(rows_p) * size_t(kbh) * 128;
    s.sw1_bytes = static_cast<size_t>(num_experts) * size_t(rows_p / 64) * size_t(kbh) * sizeof(float);
  } else {
    s.w1_bytes = static_cast<size_t>(num_experts) * size_t(2 * inter) * size_t(hidden);
    s.sw1_bytes = static_cast<size_t>(num_experts) * size_t(ceil_div(2 * inter, kQuantBlock)) * size_t(kbh) *
                  sizeof(float);
  }
  return s;
}

void moe_prepare_w1(const void* w1, const float* sw1, int num_experts, int64_t hidden, int64_t inter, void* w1p,
                    float* sw1p, cudaStream_t stream) {
  if (moe_fused_layout(inter)) {
    moe_prepare_w1_fused(w1, sw1, num_experts, hidden, inter, w1p, sw1p, stream);
    return;
  }
  const MoePreparedSizes s = moe_prepared_sizes(num_experts, hidden, inter);
  MOEKIT_CUDA_CHECK(cudaMemcpyAsync(w1p, w1, s.w1_bytes, cudaMemcpyDeviceToDevice, stream));
  MOEKIT_CUDA_CHECK(cudaMemcpyAsync(sw1p, sw1, s.sw1_bytes, cudaMemcpyDeviceToDevice, stream));
}

size_t moe_forward_workspace_size(int64_t num_tokens, int top_k, int64_t hidden, int64_t inter, int local_count,
                                  bool mxfp4) {
  if (!moe_fused_layout(inter)) return moe_unfused_workspace_size(num_tokens, top_k, hidden, inter, local_count);
  return moe_workspace_plan(num_tokens, top_k, hidden, inter, local_count,
                            moe_sort_workspace_size(num_tokens, top_k, local_count), mxfp4)
      .bytes;
}

namespace {

void run_unfused(const MoePlan& plan, const MoeForwardRequest& r, const int32_t* ids, const float* weights,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const MoeConfig& c = plan.layer;
  const MoeUnfusedArgs u{.num_tokens = plan.num_tokens,
                         .top_k = c.top_k,
                         .hidden = c.hidden,
                         .inter = c.inter,
                         .num_experts = c.num_experts,
                         .local_offset = c.local_offset,
                         .local_count = c.local_count,
                         .limit = c.limit,
                         .x = r.x,
                         .topk_ids = ids,
                         .topk_weights = weights,
                         .w1 = r.w1p,
                         .sw1 = r.sw1p,
                         .w2 = r.w2,
                         .sw2 = r.sw2,
                         .y = r.y,
                         .invalid_count = r.invalid_count};
  moe_forward_unfused(u, workspace, workspace_bytes, stream);
  moe_stage_mark("unfused_forward", stream);
}

}  // namespace

void moe_forward(const MoePlan& plan, const MoeForwardRequest& r, void* workspace, size_t workspace_bytes,
                 cudaStream_t stream) {
  const MoeConfig& c = plan.layer;
  const int64_t t = plan.num_tokens;
  const int k = c.top_k;
  const int64_t h = c.hidden;
  if (t == 0) return;
  MOEKIT_REQUIRE(!plan.fused_layout || workspace_bytes >= plan.workspace.bytes, ErrorCode::kInvalidArgument,
                 "moekit::detail::moe_forward: workspace ", workspace_bytes, " bytes < ", plan.workspace.bytes,
                 " needed");
  MOEKIT_REQUIRE(!r.slot_rows || plan.gemm2.rows_then_combine, ErrorCode::kInvalidArgument,
                 "moekit::detail::moe_forward: slot_rows needs a plan with bf16 GEMM2 rows (deterministic)");
  const Regions p = regions(static_cast<char*>(workspace), plan.workspace);
  MoeSortBuffers sort = p.sort;
  sort.invalid_count = r.invalid_count;
  const size_t sort_bytes = plan.workspace.sort_scratch_bytes;
  const int32_t* ids = plan.from_logits ? r.routed_ids : r.topk_ids;
  const float* weights = plan.from_logits ? r.routed_weights : r.topk_weights;
  // The activation pass (or the sort that quantizes) also zeroes y_acc (no memset launch) and the
  // GEMMs' tile counters. Gathered, the token-major xq / sx live in the permuted buffers' space.
  float* zero_acc = plan.gemm2.rows_then_combine ? nullptr : p.y_acc;
  const RouteSortQuantize q{r.x, h, p.a_perm, p.sa_perm, zero_acc, p.counters, kMoeTileCounters};
  if (plan.from_logits) {
    const RoutingConfig& routing = *c.routing;
    if (plan.route_sort) {
      moe_route_sort(routing, r.logits, r.logits_type, t, r.routed_ids, r.routed_weights, c.num_experts,
                     c.local_offset, c.local_count, sort, p.sort_scratch, sort_bytes, stream,
                     plan.quantize_in_sort ? &q : nullptr);
      moe_stage_mark(plan.quantize_in_sort ? "route_sort_quantize" : "route_sort", stream);
    } else {
      if (!moe_diag_skip("route"))
        route(routing, r.logits, r.logits_type, t, r.routed_ids, r.routed_weights, stream);
      moe_stage_mark("route", stream);
    }
  }
  if (!plan.fused_layout) return run_unfused(plan, r, ids, weights, workspace, workspace_bytes, stream);
  if (!plan.route_sort) {
    if (plan.quantize_in_sort) {
      moe_sort_quantize(ids, t, k, c.num_experts, c.local_offset, c.local_count, sort, p.sort_scratch, sort_bytes, q,
                        stream);
    } else if (!moe_diag_skip("sort")) {
      moe_sort_with_path(plan.sort_single_cta ? MoeSortPath::kSingleCta : MoeSortPath::kRadix, ids, t, k,
                         c.num_experts, c.local_offset, c.local_count, sort, p.sort_scratch, sort_bytes, stream);
    }
    moe_stage_mark(plan.quantize_in_sort ? "sort_quantize" : "sort", stream);
  }
  if (plan.quantize_in_sort) {
    // done by the sort's launch
  } else if (plan.prequantized) {  // the quantize pass's zeroing duties, and (MXFP4) the per-slot copy
    MOEKIT_CUDA_CHECK(cudaMemsetAsync(p.counters, 0, kMoeTileCounters * sizeof(unsigned), stream));
    if (zero_acc) MOEKIT_CUDA_CHECK(cudaMemsetAsync(zero_acc, 0, size_t(t) * size_t(h) * sizeof(float), stream));
    if (!plan.gather)
      gather_rows(r.xq, r.sxq, sort.permuted_to_expanded, t, h, k, plan.rows, p.a_perm, p.sa_perm, stream);
    moe_stage_mark("permute_prequantized", stream);
  } else if (plan.gather) {
    if (!moe_diag_skip("permute_quant"))
      quantize_tokens_zeroing(r.x, t, h, p.a_perm, p.sa_perm, zero_acc, stream, p.counters, kMoeTileCounters);
    moe_stage_mark("quantize", stream);
  } else {
    if (!moe_diag_skip("permute_quant"))
      permute_quantize_by_token_zeroing(r.x, t, h, k, sort.expanded_to_permuted, plan.rows, p.a_perm, p.sa_perm, false,
                                        zero_acc, stream, p.counters, kMoeTileCounters,
                                        plan.permute_token_scales
                                            ? TokenScales{p.sx_tokens, sort.permuted_to_expanded}
                                            : TokenScales{});
    moe_stage_mark("permute_quant", stream);
  }

  // Gathered, GEMM1 reads token rows (row_map / top_k) from the token-major copy in a_perm.
  const bool in_place = plan.prequantized && plan.gather;  // GEMM1 reads the caller's rows
  const void* a_tokens = in_place ? r.xq : p.a_perm;
  const float* sa_tokens = in_place ? r.sxq : p.sa_perm;
  const MoeGemm1Args g1{.a = a_tokens,
                        .sa = sa_tokens,
                        .a_tokens = plan.gather ? a_tokens : nullptr,
                        .sa_tokens = plan.gather ? sa_tokens : nullptr,
                        .num_tokens = plan.gather ? t : 0,
                        .row_map = plan.gather ? sort.permuted_to_expanded : nullptr,
                        .top_k = plan.gather ? k : 0,
                        .rows = plan.rows,
                        .hidden = h,
                        .inter = c.inter,
                        .num_experts = c.local_count,
                        .offsets = sort.expert_offsets,
                        .counts = sort.expert_counts,
                        .w1p = r.w1p,
                        .sw1p = r.sw1p,
                        .limit = c.limit,
                        .b1 = r.b1,
                        .gpt_oss = c.activation == MoeActivation::kGptOss,
                        .alpha = c.activation_alpha,
                        .hq = p.hq,
                        .sh = p.sh,
                        .tile_counter = p.counters,
                        .sk_partials = p.sk_partials,
                        .sk_flags = p.counters + 2,
                        .plan = plan.gemm1};
  if (!moe_diag_skip("gemm1_swiglu")) moe_gemm1_swiglu(g1, stream);
  moe_stage_mark("gemm1_swiglu", stream);

  if (plan.gemm2.rows_then_combine) {
    const GroupedGemmFp8Args g2{.num_groups = c.local_count,
                                .n = h,
                                .k = c.inter,
                                .a = p.hq,
                                .lda = c.inter,
                                .sa = p.sh,
                                .b = r.w2,
                                .ldb = c.inter,
                                .sb = r.sw2,
                                .d = p.d2,
                                .ldd = h};
    if (!moe_diag_skip("gemm2_rows"))
      grouped_gemm_fp8_contiguous_counted(g2, plan.rows, sort.expert_offsets, sort.expert_counts,
                                          plan.gemm2.dynamic ? p.counters + 1 : nullptr, stream, &plan.gemm2.config,
                                          plan.gemm2.mx_stages);
    moe_stage_mark("gemm2_rows", stream);
    if (r.slot_rows) {
      moe_rows_to_slots(p.d2, h, sort.expanded_to_permuted, t, k, h, r.slot_rows, stream);
      moe_stage_mark("rows_to_slots", stream);
      return;
    }
    if (!moe_diag_skip("combine"))
      moe_combine_with_bias(p.d2, h, sort.expanded_to_permuted, weights, t, k, h, r.y, h, stream,
                            MoeCombineBias{r.b2, ids, c.local_offset});
    moe_stage_mark("combine", stream);
    return;
  }
  const MoeGemm2Args g2{.hq = p.hq,
                        .sh = p.sh,
                        .rows = plan.rows,
                        .hidden = h,
                        .inter = c.inter,
                        .num_experts = c.local_count,
                        .offsets = sort.expert_offsets,
                        .counts = sort.expert_counts,
                        .w2 = r.w2,
                        .sw2 = r.sw2,
                        .row_map = sort.permuted_to_expanded,
                        .topk_weights = weights,
                        .top_k = k,
                        .y_acc = p.y_acc,
                        .b2 = r.b2,
                        .tile_counter = p.counters + 1,
                        .plan = plan.gemm2};
  if (!moe_diag_skip("gemm2_scatter")) moe_gemm2_scatter(g2, stream);
  moe_stage_mark("gemm2_scatter", stream);
  if (!moe_diag_skip("finalize")) moe_finalize_bf16(p.y_acc, t, h, r.y, stream);
  moe_stage_mark("finalize", stream);
}

}  // namespace moekit::detail
