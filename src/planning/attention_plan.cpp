#include "planning/attention_plan.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace moekit::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

void validate_sparse_attention_shape(const SparseAttentionArgs& a, const char* fn) {
  MOEKIT_REQUIRE(a.num_tokens >= 0 && a.heads >= 1, ErrorCode::kInvalidArgument, fn, ": num_tokens = ", a.num_tokens,
                 " must be >= 0 and heads = ", a.heads, " >= 1");
  MOEKIT_REQUIRE(a.dim == 64 || a.dim == 128 || a.dim == 256 || a.dim == 512, ErrorCode::kInvalidArgument, fn,
                 ": dim = ", a.dim, " (supported: 64, 128, 256, 512)");
  // Above ~1e6 the base-2 scores of ordinary data overflow to inf (and a zero row to NaN).
  MOEKIT_REQUIRE(std::isfinite(a.softmax_scale) && a.softmax_scale > 0.0f && a.softmax_scale <= 1e6f,
                 ErrorCode::kInvalidArgument, fn, ": softmax_scale = ", a.softmax_scale, " must be in (0, 1e6]");
  MOEKIT_REQUIRE(a.topk >= 0 && a.window >= 0 && a.window <= kAttnMaxWindow, ErrorCode::kInvalidArgument, fn,
                 ": topk = ", a.topk, " must be >= 0 and window = ", a.window, " in [0, ", kAttnMaxWindow, "]");
  // The kernel indexes a token's keys with int: splits and the window's offset stay below 2^31.
  MOEKIT_REQUIRE(int64_t(a.topk) + a.window < (int64_t(1) << 28), ErrorCode::kInvalidArgument, fn,
                 ": topk + window = ", int64_t(a.topk) + a.window, " must be < 2^28");
  MOEKIT_REQUIRE(a.num_tokens <= (int64_t(1) << 40) / a.heads, ErrorCode::kInvalidArgument, fn,
                 ": num_tokens * heads is too large");
  if (a.num_tokens == 0) return;
  MOEKIT_REQUIRE(a.q != nullptr, ErrorCode::kInvalidArgument, fn, ": q is required");
  MOEKIT_REQUIRE(a.topk == 0 || a.topk_indices != nullptr, ErrorCode::kInvalidArgument, fn,
                 ": topk = ", a.topk, " needs topk_indices");
  if (a.window > 0) {
    MOEKIT_REQUIRE(a.window_indices != nullptr, ErrorCode::kInvalidArgument, fn, ": window = ", a.window,
                   " needs window_indices");
    MOEKIT_REQUIRE(a.token_request != nullptr ? a.num_requests >= 0 : a.num_requests == a.num_tokens,
                   ErrorCode::kInvalidArgument, fn, ": num_requests = ", a.num_requests,
                   a.token_request != nullptr ? " must be >= 0" : " must equal num_tokens without token_request");
    MOEKIT_REQUIRE(a.window_positions == nullptr || a.query_positions != nullptr, ErrorCode::kInvalidArgument, fn,
                   ": window_positions (the causal mask) needs query_positions");
  }
  MOEKIT_REQUIRE(aligned(a.q, 16), ErrorCode::kMisaligned, fn, ": q must be 16-byte aligned");
  for (const void* p : {static_cast<const void*>(a.sink), static_cast<const void*>(a.topk_indices),
                        static_cast<const void*>(a.topk_lens), static_cast<const void*>(a.window_indices),
                        static_cast<const void*>(a.window_lens), static_cast<const void*>(a.token_request),
                        static_cast<const void*>(a.window_positions), static_cast<const void*>(a.query_positions)})
    MOEKIT_REQUIRE(aligned(p, 4), ErrorCode::kMisaligned, fn, ": sink and the index arrays must be 4-byte aligned");
}

void validate_mixed_kv_strides(const MixedKvCache& c, const char* fn) {
  MOEKIT_REQUIRE(c.nope_stride >= MixedKvCache::kNope && c.nope_stride % 16 == 0, ErrorCode::kInvalidArgument, fn,
                 ": the mixed cache's nope_stride = ", c.nope_stride, " must be >= 448 and a multiple of 16");
  MOEKIT_REQUIRE(c.scales_stride >= 4 * MixedKvCache::kScales && c.scales_stride % 4 == 0,
                 ErrorCode::kInvalidArgument, fn, ": the mixed cache's scales_stride = ", c.scales_stride,
                 " must be >= 28 and a multiple of 4");
  MOEKIT_REQUIRE(c.rope_stride >= 2 * MixedKvCache::kRope && c.rope_stride % 16 == 0, ErrorCode::kInvalidArgument, fn,
                 ": the mixed cache's rope_stride = ", c.rope_stride, " must be >= 128 and a multiple of 16");
}

void validate_sparse_attention(const SparseAttentionArgs& a, const AttentionKv& kv, const char* fn) {
  validate_sparse_attention_shape(a, fn);
  if (kv.format == KvFormat::kMixedFp8) {
    MOEKIT_REQUIRE(a.dim == MixedKvCache::kNope + MixedKvCache::kRope, ErrorCode::kInvalidArgument, fn,
                   ": the mixed FP8 cache has dim 512, not ", a.dim);
    MOEKIT_REQUIRE(kv.mixed.num_entries >= 0 && kv.mixed.num_entries <= INT32_MAX, ErrorCode::kInvalidArgument, fn,
                   ": the cache's num_entries = ", kv.mixed.num_entries, " must be in [0, 2^31)");
    validate_mixed_kv_strides(kv.mixed, fn);
    if (a.num_tokens == 0 || kv.mixed.num_entries == 0) return;
    MOEKIT_REQUIRE(kv.mixed.nope && kv.mixed.scales && kv.mixed.rope, ErrorCode::kInvalidArgument, fn,
                   ": the mixed cache's nope, scales and rope are required");
    MOEKIT_REQUIRE(aligned(kv.mixed.nope, 16) && aligned(kv.mixed.scales, 4) && aligned(kv.mixed.rope, 16),
                   ErrorCode::kMisaligned, fn, ": the mixed cache's nope and rope must be 16-, scales 4-byte aligned");
  } else {
    MOEKIT_REQUIRE(kv.format == KvFormat::kBf16, ErrorCode::kInvalidArgument, fn, ": unknown KvFormat");
    MOEKIT_REQUIRE(kv.num_entries >= 0 && kv.num_entries <= INT32_MAX, ErrorCode::kInvalidArgument, fn,
                   ": num_entries = ", kv.num_entries, " must be in [0, 2^31)");
    if (a.num_tokens == 0 || kv.num_entries == 0) return;
    MOEKIT_REQUIRE(kv.bf16 != nullptr, ErrorCode::kInvalidArgument, fn, ": the bf16 cache pointer is required");
    MOEKIT_REQUIRE(aligned(kv.bf16, 16), ErrorCode::kMisaligned, fn, ": the bf16 cache must be 16-byte aligned");
  }
}

SparseAttentionPlan checked_plan(const SparseAttentionArgs& a, AttentionOutput mode, int num_sms, const char* fn) {
  MOEKIT_REQUIRE(mode == AttentionOutput::kNormalized || mode == AttentionOutput::kPerSourcePartials,
                 ErrorCode::kInvalidArgument, fn, ": unknown AttentionOutput");
  const SparseAttentionPlan p = plan_sparse_attention(a, mode, num_sms);
  MOEKIT_REQUIRE(a.num_tokens * p.splits * p.head_blocks < (int64_t(1) << 31), ErrorCode::kInvalidArgument, fn, ": ",
                 a.num_tokens, " tokens x ", p.splits, " splits x ", p.head_blocks, " head blocks exceed the grid");
  return p;
}

SparseAttentionPlan plan_sparse_attention(const SparseAttentionArgs& a, AttentionOutput mode, int num_sms) {
  SparseAttentionPlan p;
  p.head_blocks = int(ceil_div(a.heads, kAttnHeadsPerCta));
  const int64_t ctas = std::max<int64_t>(a.num_tokens * p.head_blocks, 1);
  const int64_t keys = int64_t(a.topk) + a.window;
  // Splits that fill the SMs once, none shorter than kAttnMinSplitKeys keys.
  int64_t want = std::max<int64_t>(1, std::max(num_sms, 1) / ctas);
  want = std::min<int64_t>(want, std::max<int64_t>(1, ceil_div(keys, kAttnMinSplitKeys)));
  p.chunk = int(std::max<int64_t>(kAttnTileKeys, ceil_div(ceil_div(std::max<int64_t>(keys, 1), want), kAttnTileKeys) *
                                                     kAttnTileKeys));
  if (mode == AttentionOutput::kNormalized) {
    p.window_offset = a.topk;
    p.splits = int(std::max<int64_t>(1, ceil_div(keys, p.chunk)));
    p.topk_splits = 0;
    p.direct = p.splits == 1;
  } else {
    // Each source its own splits (at least one each, so an empty source still writes its partial).
    p.topk_splits = int(std::max<int64_t>(1, ceil_div(a.topk, p.chunk)));
    p.window_offset = p.topk_splits * p.chunk;
    p.splits = p.topk_splits + int(std::max<int64_t>(1, ceil_div(a.window, p.chunk)));
    p.direct = p.splits == 2;
  }
  if (!p.direct) {
    const size_t rows = size_t(a.num_tokens) * size_t(a.heads) * size_t(p.splits);
    p.workspace_lse_offset = (rows * size_t(a.dim) * sizeof(float) + 255) / 256 * 256;
    p.workspace_bytes = p.workspace_lse_offset + (rows * sizeof(float) + 255) / 256 * 256;
  }
  return p;
}

}  // namespace moekit::detail
