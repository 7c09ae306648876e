// Host references of DeepSeek-V4's attention (issue 38; docs/design.md §DeepSeek-V4 attention):
// the mixed FP8/BF16 KV entry format, RoPE on the last 64 dims, and the attention itself in
// float64 — one MQA head of K = V shared by all query heads, any number of sources per query
// (the indexer's top-k entries, the sliding window), an optional per-head sink, normalized or
// per-source partial outputs, and the merge of partials. The kernels (sparse_mqa_kernel.cuh) are checked
// against these; nothing here runs on the GPU.
#pragma once
#include <cstdint>
#include <vector>

namespace moekit::detail {

/// A KV cache entry of the mixed format: 448 "nope" dims as E4M3 codes with one power-of-two
/// scale per 64 dims, then 64 "rope" dims in bf16 (head dim 512).
struct MixedKvFormat {
  static constexpr int kNope = 448;
  static constexpr int kRope = 64;
  static constexpr int kDim = kNope + kRope;
  static constexpr int kGroup = 64;                 ///< dims per scale
  static constexpr int kScales = kNope / kGroup;    ///< 7
};

/// The power-of-two scale of a group with largest magnitude `amax`: the smallest 2^e with
/// amax / 2^e <= 448 (E4M3's largest finite value), 1 for an all-zero group; NaN for a NaN amax.
float mixed_kv_group_scale(float amax);

/// Quantizes n entries k [n, 512] (float) into nope codes [n, 448], scales [n, 7] and rope
/// [n, 64] bf16: code = e4m3(x / scale) (RN, satfinite), rope = bf16(x) (RN).
void quantize_mixed_kv(const float* k, int64_t n, uint8_t* nope, float* scales, uint16_t* rope);

/// The entries' values [n, 512] back: code * scale, then the rope dims.
void dequantize_mixed_kv(const uint8_t* nope, const float* scales, const uint16_t* rope, int64_t n, float* k);

/// RoPE on the last `rope_dims` of each row x [rows, dim] (pairs (2i, 2i + 1) of those dims, the
/// interleaved form): (a, b) → (a cos − b sin, a sin + b cos) with cos / sin [max_positions]
/// [rope_dims / 2] at the row's position; `inverse` rotates by −θ. Rows whose position is < 0 or
/// ≥ max_positions are left as they are (as rope_inplace does).
void rope_reference(double* x, int64_t rows, int64_t dim, int64_t rope_dims, const int32_t* pos, const float* cos,
                    const float* sin, int64_t max_positions, bool inverse);

/// One source of one query: cache entry indices (< 0: none), and, for causal sources, each entry's
/// token position (entries after the query's position are masked).
struct AttentionSource {
  std::vector<int32_t> entries;
  std::vector<int32_t> positions;  ///< empty: not causal; else one per entry
};

/// The float64 attention of one query token over its sources, for every query head.
///   q [heads, dim], kv [entries, dim] (K = V, dequantized), sink [heads] (null: none).
///   s_j = softmax_scale · q·k_j over the unmasked entries of all sources;
///   o = Σ_j e^{s_j} v_j / (Σ_j e^{s_j} + e^{sink}); lse = ln Σ_j e^{s_j} (the sink left out).
/// A query with nothing to attend: o = 0, lse = −inf.
struct AttentionRefOut {
  std::vector<double> o;    ///< [heads, dim]
  std::vector<double> lse;  ///< [heads]
};
AttentionRefOut attention_reference(const double* q, int heads, int dim, const double* kv, int64_t num_entries,
                                    const std::vector<AttentionSource>& sources, int32_t query_pos,
                                    double softmax_scale, const double* sink);

/// The partial of one source (attention_reference over that source alone, no sink): o normalized
/// within the source, lse its log-sum — what a kernel's partial mode returns per source.
inline AttentionRefOut attention_partial_reference(const double* q, int heads, int dim, const double* kv,
                                                   int64_t num_entries, const AttentionSource& source,
                                                   int32_t query_pos, double softmax_scale) {
  return attention_reference(q, heads, dim, kv, num_entries, {source}, query_pos, softmax_scale, nullptr);
}

/// Merges per-source partials of one query (each [heads, dim] o and [heads] lse): source i is
/// weighted by e^{weight_logit_i[h]} (null: 1), the sink (null: none) joins the denominator:
///   o = Σ_i e^{lse_i + w_i} o_i / (Σ_i e^{lse_i + w_i} + e^{sink}),  lse = ln Σ_i e^{lse_i + w_i}.
/// With no weights this equals attention_reference over the union of the sources.
AttentionRefOut merge_partials_reference(const std::vector<AttentionRefOut>& partials,
                                         const std::vector<const double*>& weight_logits, int heads, int dim,
                                         const double* sink);

}  // namespace moekit::detail
