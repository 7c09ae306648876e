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
#include "moe/moe_forward.h"

#include <algorithm>
#include <cstdlib>

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "moe/workspace_carver.h"
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

bool fused_layout(int64_t inter) { return inter % 64 == 0; }

// Largest FP32 accumulator y_acc [T, H] for which GEMM2 scatter-adds (a third of the H100's L2).
constexpr int64_t kScatterAccBytesMax = int64_t(16) << 20;

constexpr int kCounters = 2;

// The permute stores each token's scales once and gathers them by row (TokenScales) from 2^19
// per-slot scale stores (T * k * ceil(H / 128)) on. Measured on the H100 (perf-notes v25), permute
// stage us, per-slot → gathered: deepseek-v3 T = 4096 (1.8 M stores) 142 → 114, T = 16384 (7.3 M)
// 584 → 463; gpt-oss-120b T = 16384 (1.5 M) 123 → 110, T = 4096 (0.38 M) 32 → 32; mixtral-8x7b
// T = 4096 (0.26 M) 30 → 33, T = 2048 17 → 20 (the second launch costs more than it saves there).
bool token_scales_pay(int64_t num_tokens, int top_k, int64_t hidden) {
  return num_tokens * top_k * ceil_div(hidden, kQuantBlock) >= (int64_t{1} << 19);
}

struct Plan : MoeSortRegions {  // sort, ws, ws_bytes, rows
  uint8_t* a_perm;
  float* sa_perm;
  uint8_t* hq;
  float* sh;
  float* y_acc;     // fused GEMM2
  uint16_t* d2;     // deterministic GEMM2
  unsigned* counters;  // [kCounters] zeroed by the permute: GEMM1's and GEMM2's dynamic tile counters
  float* sx_tokens;    // [T, ceil(H/128)]: the permute's token-major scales (TokenScales)
  size_t bytes;
};

Plan carve(char* base, int64_t t, int k, int64_t h, int64_t inter, int local_count) {
  WorkspaceCarver c{base};
  Plan p{};
  static_cast<MoeSortRegions&>(p) = take_sort_regions(c, t, k, local_count);
  p.a_perm = c.take<uint8_t>(p.rows * h);
  p.sa_perm = c.take<float>(sfa_physical_size(p.rows, h));
  p.hq = c.take<uint8_t>(p.rows * inter);
  p.sh = c.take<float>(sfa_physical_size(p.rows, inter));
  // GEMM2's output: the FP32 accumulator, or (deterministic mode) bf16 rows; never both.
  const int64_t out_bytes = std::max<int64_t>(t * h * 4, p.rows * h * 2);
  p.y_acc = reinterpret_cast<float*>(c.take<char>(out_bytes));
  p.d2 = reinterpret_cast<uint16_t*>(p.y_acc);
  p.counters = c.take<unsigned>(kCounters);
  p.sx_tokens = c.take<float>(t * ceil_div(h, kQuantBlock));
  p.bytes = c.used;
  return p;
}

}  // namespace

MoePreparedSizes moe_prepared_sizes(int num_experts, int64_t hidden, int64_t inter) {
  MoePreparedSizes s;
  const int64_t kbh = ceil_div(hidden, kQuantBlock);
  if (fused_layout(inter)) {
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
  if (fused_layout(inter)) {
    moe_prepare_w1_fused(w1, sw1, num_experts, hidden, inter, w1p, sw1p, stream);
    return;
  }
  const MoePreparedSizes s = moe_prepared_sizes(num_experts, hidden, inter);
  MOEKIT_CUDA_CHECK(cudaMemcpyAsync(w1p, w1, s.w1_bytes, cudaMemcpyDeviceToDevice, stream));
  MOEKIT_CUDA_CHECK(cudaMemcpyAsync(sw1p, sw1, s.sw1_bytes, cudaMemcpyDeviceToDevice, stream));
}

size_t moe_forward_workspace_size(int64_t num_tokens, int top_k, int64_t hidden, int64_t inter, int local_count) {
  if (!fused_layout(inter)) return moe_unfused_workspace_size(num_tokens, top_k, hidden, inter, local_count);
  return carve(nullptr, num_tokens, top_k, hidden, inter, local_count).bytes;
}

void moe_forward(const MoeForwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  MoeForwardArgs a = args;
  const bool fused = fused_layout(a.inter);
  const Plan p = carve(static_cast<char*>(workspace), a.num_tokens, a.top_k, a.hidden, a.inter, a.local_count);
  MOEKIT_REQUIRE(!fused || workspace_bytes >= p.bytes, ErrorCode::kInvalidArgument,
                 "moekit::detail::moe_forward: workspace ", workspace_bytes, " bytes < ", p.bytes, " needed");
  MoeSortBuffers sort = p.sort;
  sort.invalid_count = a.invalid_count;
  // The FP32 scatter-add pays off while y_acc stays in L2; past that its atomics miss to DRAM
  // (measured at T = 16384: 176 M reduction sectors, GEMM2 8.6 ms) and bf16 rows + the ordered
  // combine move fewer bytes.
  const bool rows_then_combine = a.deterministic || a.num_tokens * a.hidden * 4 > kScatterAccBytesMax;
  const MoeLoadEstimate load = moe_expected_load(a.num_tokens, a.top_k, a.num_experts, a.local_count);
  // GEMM1's activations: quantized once per token either way; then either permuted copies (one
  // per slot, TMA tiles) or the tokens in place, gathered row by row by GEMM1. The pass also
  // zeroes y_acc (no memset launch) and the GEMMs' tile counters. Gathered, the token-major xq / sx
  // live in the permuted buffers' space (T <= rows).
  const bool gather = a.num_tokens > 0 && moe_gemm1_gather(a.gemm1_input, a.num_tokens, a.hidden, load);
  float* zero_acc = rows_then_combine ? nullptr : p.y_acc;
  bool sorted = false;     // the fused route + sort ran
  bool quantized = false;  // the sort's launch quantized the tokens (the gather variant's input)
  static const bool fuse_quantize = [] {  // MOEKIT_FUSED_QUANT=0: the quantize pass as a kernel of its own
    const char* v = std::getenv("MOEKIT_FUSED_QUANT");
    return v == nullptr || v[0] != '0';
  }();
  const RouteSortQuantize q{a.x, a.hidden, p.a_perm, p.sa_perm, zero_acc, p.counters, kCounters};
  if (a.routing) {
    a.topk_ids = a.routed_ids;
    a.topk_weights = a.routed_weights;
    if (fused && a.num_tokens > 0 && !moe_diag_skip("route") &&
        moe_route_sort_applies(*a.routing, a.num_tokens, a.local_count)) {
      quantized = fuse_quantize && gather && !moe_diag_skip("permute_quant");
      moe_route_sort(*a.routing, a.logits, a.logits_type, a.num_tokens, a.routed_ids, a.routed_weights,
                     a.num_experts, a.local_offset, a.local_count, sort, p.ws, p.ws_bytes, stream,
                     quantized ? &q : nullptr);
      moe_stage_mark(quantized ? "route_sort_quantize" : "route_sort", stream);
      sorted = true;
    } else {
      if (!moe_diag_skip("route"))
        route(*a.routing, a.logits, a.logits_type, a.num_tokens, a.routed_ids, a.routed_weights, stream);
      moe_stage_mark("route", stream);
    }
  }
  if (!fused) {
    MoeUnfusedArgs u;
    u.num_tokens = a.num_tokens;
    u.top_k = a.top_k;
    u.hidden = a.hidden;
    u.inter = a.inter;
    u.num_experts = a.num_experts;
    u.local_offset = a.local_offset;
    u.local_count = a.local_count;
    u.limit = a.limit;
    u.x = a.x;
    u.topk_ids = a.topk_ids;
    u.topk_weights = a.topk_weights;
    u.w1 = a.w1p;
    u.sw1 = a.sw1p;
    u.w2 = a.w2;
    u.sw2 = a.sw2;
    u.y = a.y;
    u.invalid_count = a.invalid_count;
    moe_forward_unfused(u, workspace, workspace_bytes, stream);
    moe_stage_mark("unfused_forward", stream);
    return;
  }
  if (!sorted) {
    // Callers' top-k ids: the single-CTA sort quantizes the tokens in the same launch, as above.
    quantized = fuse_quantize && gather && moe_sort_quantize_applies(a.num_tokens, a.top_k, a.local_count) &&
                !moe_diag_skip("sort") && !moe_diag_skip("permute_quant");
    if (quantized) {
      moe_sort_quantize(a.topk_ids, a.num_tokens, a.top_k, a.num_experts, a.local_offset, a.local_count, sort, p.ws,
                        p.ws_bytes, q, stream);
    } else if (!moe_diag_skip("sort")) {
      moe_sort(a.topk_ids, a.num_tokens, a.top_k, a.num_experts, a.local_offset, a.local_count, sort, p.ws,
               p.ws_bytes, stream);
    }
    moe_stage_mark(quantized ? "sort_quantize" : "sort", stream);
  }
  if (a.num_tokens == 0) return;
  if (quantized) {
    // done by the route + sort launch
  } else if (gather) {
    if (!moe_diag_skip("permute_quant"))
      quantize_tokens_zeroing(a.x, a.num_tokens, a.hidden, p.a_perm, p.sa_perm, zero_acc, stream, p.counters,
                              kCounters);
    moe_stage_mark("quantize", stream);
  } else {
    if (!moe_diag_skip("permute_quant"))
      permute_quantize_by_token_zeroing(a.x, a.num_tokens, a.hidden, a.top_k, sort.expanded_to_permuted, p.rows,
                                        p.a_perm, p.sa_perm, false, zero_acc, stream, p.counters, kCounters,
                                        token_scales_pay(a.num_tokens, a.top_k, a.hidden)
                                            ? TokenScales{p.sx_tokens, sort.permuted_to_expanded}
                                            : TokenScales{});
    moe_stage_mark("permute_quant", stream);
  }

  MoeGemm1Args g1;
  g1.a = p.a_perm;
  g1.sa = p.sa_perm;
  if (gather) {
    g1.a_tokens = p.a_perm;
    g1.sa_tokens = p.sa_perm;
    g1.num_tokens = a.num_tokens;
    g1.row_map = sort.permuted_to_expanded;
    g1.top_k = a.top_k;
  }
  g1.rows = p.rows;
  g1.hidden = a.hidden;
  g1.inter = a.inter;
  g1.num_experts = a.local_count;
  g1.offsets = sort.expert_offsets;
  g1.counts = sort.expert_counts;
  g1.w1p = a.w1p;
  g1.sw1p = a.sw1p;
  g1.promote_k = a.gemm1_promote_k;
  g1.limit = a.limit;
  g1.hq = p.hq;
  g1.sh = p.sh;
  g1.expected = load;
  g1.tile_counter = p.counters;
  g1.layout_from_previous = quantized;
  if (!moe_diag_skip("gemm1_swiglu")) moe_gemm1_swiglu(g1, stream);
  moe_stage_mark("gemm1_swiglu", stream);

  if (rows_then_combine) {
    GroupedGemmFp8Args g2;
    g2.num_groups = a.local_count;
    g2.n = a.hidden;
    g2.k = a.inter;
    g2.a = p.hq;
    g2.lda = a.inter;
    g2.sa = p.sh;
    g2.b = a.w2;
    g2.ldb = a.inter;
    g2.sb = a.sw2;
    g2.d = p.d2;
    g2.ldd = a.hidden;
    if (!moe_diag_skip("gemm2_rows"))
      grouped_gemm_fp8_contiguous_counted(g2, p.rows, sort.expert_offsets, sort.expert_counts,
                                          moe_dynamic_scheduling(2) ? p.counters + 1 : nullptr, stream);
    moe_stage_mark("gemm2_rows", stream);
    if (!moe_diag_skip("combine"))
      moe_combine(p.d2, a.hidden, sort.expanded_to_permuted, a.topk_weights, a.num_tokens, a.top_k, a.hidden, a.y,
                  a.hidden, stream);
    moe_stage_mark("combine", stream);
    return;
  }
  MoeGemm2Args g2;
  g2.hq = p.hq;
  g2.sh = p.sh;
  g2.rows = p.rows;
  g2.hidden = a.hidden;
  g2.inter = a.inter;
  g2.num_experts = a.local_count;
  g2.offsets = sort.expert_offsets;
  g2.counts = sort.expert_counts;
  g2.w2 = a.w2;
  g2.sw2 = a.sw2;
  g2.row_map = sort.permuted_to_expanded;
  g2.topk_weights = a.topk_weights;
  g2.top_k = a.top_k;
  g2.y_acc = p.y_acc;
  g2.expected = load;
  g2.tile_counter = p.counters + 1;
  if (!moe_diag_skip("gemm2_scatter")) moe_gemm2_scatter(g2, stream);
  moe_stage_mark("gemm2_scatter", stream);
  if (!moe_diag_skip("finalize")) moe_finalize_bf16(p.y_acc, a.num_tokens, a.hidden, a.y, stream);
  moe_stage_mark("finalize", stream);
}

}  // namespace moekit::detail
