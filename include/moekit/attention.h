// moekit — DeepSeek-V4 attention (issue 38): sparse MQA over an indexer's top-k cache entries and
// a sliding window, one softmax with an optional sink; the mixed FP8/BF16 cache, its writer, RoPE
// and the merge of per-source partials. The float64 references of every piece are in
// src/attention/attention_reference.h (docs/design.md §DeepSeek-V4 attention).
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit {

/// The mixed FP8/BF16 KV cache of DeepSeek-V4 (head dim 512, K = V), one entry per cached token:
/// dims [0, 448) are E4M3 codes `nope[e, d]` times a power-of-two scale `scales[e, d / 64]`, dims
/// [448, 512) are bf16 `rope[e, d − 448]`. Three arrays of rows (device pointers), dense by default;
/// with strides they can share one buffer of rows, e.g. 640-byte rows [nope 448 B | rope 128 B |
/// scales 28 B | pad]: nope = base, rope = base + 448, scales = base + 576, every stride 640 — a
/// gathered entry then touches one place in memory instead of three.
struct MixedKvCache {
  static constexpr int kNope = 448;   ///< FP8 dims
  static constexpr int kRope = 64;    ///< bf16 dims (the RoPE dims)
  static constexpr int kGroup = 64;   ///< FP8 dims per scale
  static constexpr int kScales = kNope / kGroup;
  uint8_t* nope = nullptr;   ///< [num_entries, 448] E4M3 codes
  float* scales = nullptr;   ///< [num_entries, 7] powers of two (FP32)
  void* rope = nullptr;      ///< [num_entries, 64] bf16, 16-byte aligned
  int64_t num_entries = 0;
  // The strides are not checked for overlap: entries whose arrays overlap corrupt each other.
  int64_t nope_stride = kNope;            ///< bytes from one entry's codes to the next's (multiple of 16, ≥ 448)
  int64_t scales_stride = kScales * 4;    ///< bytes between entries' scales (multiple of 4, ≥ 28)
  int64_t rope_stride = kRope * 2;        ///< bytes between entries' rope dims (multiple of 16, ≥ 128)
};

/// Writes T new K rows into the cache: row t (bf16 [T, 512], row stride ldk ≥ 512 elements, a
/// multiple of 8; 16-byte aligned) goes to entry slots[t]. Each group of 64 FP8 dims gets the
/// smallest power of two s with amax / s ≤ 448 (1 for an all-zero group, NaN if the group holds a
/// NaN; an infinite amax gives s = 1 and codes ±448; below ~448 · 2^-126 the quotient rounds in
/// the subnormal range, so s may be one step off and is itself subnormal) and codes E4M3(x / s)
/// (RN, satfinite); the rope dims are copied bit for bit. The same as detail::quantize_mixed_kv
/// (which writes a NaN rope dim as 0x7FFF). Slots < 0 or ≥ num_entries are skipped (never
/// written); slots must be distinct (two rows to one slot race).
/// Asynchronous, capturable; throws moekit::Error (kInvalidArgument, kMisaligned) on bad arguments.
void mixed_kv_cache_write(const void* k, int64_t num_tokens, int64_t ldk, const int32_t* slots,
                          const MixedKvCache& cache, cudaStream_t stream);

/// RoPE in place on the last 64 dims of x, bf16 [T, heads, dim] (contiguous; dim ≥ 64, a multiple
/// of 8), interleaved pairs (2i, 2i + 1) of those dims: (a, b) → (a cos θ − b sin θ, a sin θ +
/// b cos θ), θ of token t at positions[t] from cos / sin FP32 [max_positions, 32]; `inverse`
/// rotates by −θ (DeepSeek-V4's inverse RoPE on the attention output, with the same tables). Math
/// in FP32, one bf16 rounding. Tokens whose position is < 0 or ≥ max_positions are left as they
/// are; the other dims are never touched. Asynchronous, capturable; throws on bad arguments.
void rope_inplace(void* x, int64_t num_tokens, int heads, int64_t dim, const int32_t* positions, const float* cos,
                  const float* sin, int64_t max_positions, bool inverse, cudaStream_t stream);

/// The K = V entries the attention reads (MQA: one KV head shared by all query heads).
enum class KvFormat {
  kBf16,      ///< bf16 rows [num_entries, dim] (any supported dim)
  kMixedFp8,  ///< DeepSeek-V4's MixedKvCache (dim 512)
};
/// (sparse_attention reads the mixed cache's nope and rope 16-byte aligned, scales 4-byte.)
struct AttentionKv {
  KvFormat format = KvFormat::kBf16;
  const void* bf16 = nullptr;  ///< kBf16: [num_entries, dim] row-major, 16-byte aligned
  int64_t num_entries = 0;     ///< kBf16: rows of `bf16` (kMixedFp8 reads mixed.num_entries)
  MixedKvCache mixed;          ///< kMixedFp8
};

/// One sparse-attention call: T query tokens, each with `heads` query heads of `dim` (64, 128,
/// 256 or 512) attending to the cache entries of two sources, under one softmax:
///   source 0, the indexer's top-k: topk_indices[t, j] for j < topk_lens[t] (null: all topk);
///   source 1, the sliding window of token t's request r = token_request[t] (null: r = t):
///     window_indices[r, j] for j < window_lens[r] (null: all `window`, ≤ 128), and when
///     window_positions is given, only entries with window_positions[r, j] ≤ query_positions[t]
///     (the causal mask of prefill).
/// An index < 0 or ≥ the cache's num_entries is no entry (skipped, never read), as is a window of
/// a request outside [0, num_requests). Scores s_j = softmax_scale · q·k_j; with a sink (a
/// natural-log logit per head), p_j = e^{s_j} / (Σ e^{s} + e^{sink}); lse = ln Σ e^{s} (the sink
/// left out). A query with nothing to attend gets o = 0 and lse = −inf.
struct SparseAttentionArgs {
  const void* q = nullptr;  ///< bf16 [num_tokens, heads, dim], contiguous, 16-byte aligned
  int64_t num_tokens = 0;
  int heads = 0;
  int dim = 0;
  float softmax_scale = 0.0f;       ///< in (0, 1e6] (DeepSeek-V4: 1 / sqrt(dim))
  const float* sink = nullptr;      ///< [heads] or null (no sink)
  const int32_t* topk_indices = nullptr;  ///< [num_tokens, topk]
  int topk = 0;                           ///< topk + window < 2^28
  const int32_t* topk_lens = nullptr;     ///< [num_tokens] or null; clamped to [0, topk]
  const int32_t* window_indices = nullptr;  ///< [num_requests, window]
  int window = 0;                           ///< 0 .. 128
  const int32_t* window_lens = nullptr;     ///< [num_requests] or null; clamped to [0, window]
  const int32_t* token_request = nullptr;   ///< [num_tokens] or null (then num_requests = num_tokens)
  int64_t num_requests = 0;
  const int32_t* window_positions = nullptr;  ///< [num_requests, window] or null (no causal mask)
  const int32_t* query_positions = nullptr;   ///< [num_tokens]; required with window_positions
};

enum class AttentionOutput {
  kNormalized,         ///< o bf16 [T, heads, dim] (sink applied), lse f32 [T, heads]
  kPerSourcePartials,  ///< per source i (0 top-k, 1 window), no sink: o_i = Σ_{j∈i} e^{s_j} v_j /
                       ///< Σ_{j∈i} e^{s_j} as f32 [2, T, heads, dim], lse_i as f32 [2, T, heads]
                       ///< — what attention_merge combines
};
struct SparseAttentionOut {
  void* o = nullptr;          ///< kNormalized: bf16 [T, heads, dim]
  float* lse = nullptr;       ///< kNormalized: [T, heads], or null (not written)
  float* o_partial = nullptr;   ///< kPerSourcePartials: [2, T, heads, dim]
  float* lse_partial = nullptr; ///< kPerSourcePartials: [2, T, heads]
};

/// Bytes of device workspace sparse_attention needs for these arguments and mode on the current
/// device (0 when the kernel writes its outputs directly: enough tokens to fill the GPU, one
/// split per source). Throws like sparse_attention on bad shapes.
size_t sparse_attention_workspace_bytes(const SparseAttentionArgs& args, AttentionOutput mode);

/// Sparse MQA attention (DeepSeek-V4): BF16 tensor-core math with FP32 accumulation, mixed FP8
/// entries dequantized exactly to bf16 on the way into shared memory, P rounded to bf16 for P·V.
/// Splits long key lists over several CTAs when the tokens alone do not fill the GPU and merges
/// them (workspace: sparse_attention_workspace_bytes, 16-byte aligned). Asynchronous, no host
/// sync, capturable in a CUDA graph; throws moekit::Error (kInvalidArgument, kMisaligned) on bad
/// arguments before launching anything, kUnsupportedDevice off Hopper.
void sparse_attention(const SparseAttentionArgs& args, const AttentionKv& kv, AttentionOutput mode,
                      const SparseAttentionOut& out, void* workspace, size_t workspace_bytes, cudaStream_t stream);

/// Merges per-source partials (o f32 [num_sources, rows, dim], lse f32 [num_sources, rows], rows
/// = T · heads, row r's head r % heads): source i is weighted by e^{weight_logits[i, h]} (null:
/// 1; DeepSeek-V4's sink-weighted window merge), the sink (null: none) joins the denominator:
///   o = Σ_i e^{lse_i + w_i} o_i / (Σ_i e^{lse_i + w_i} + e^{sink}),  lse = ln Σ_i e^{lse_i + w_i};
/// sources with lse = −inf are skipped (their o is never read); none left: o = 0, lse = −inf.
/// Writes o as bf16 [rows, dim] and lse [rows] (null: not written). Asynchronous, capturable.
void attention_merge(const float* o_partials, const float* lse_partials, int num_sources, int64_t num_tokens,
                     int heads, int dim, const float* weight_logits, const float* sink, void* o, float* lse,
                     cudaStream_t stream);

}  // namespace moekit
