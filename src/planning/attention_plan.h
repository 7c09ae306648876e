// The sparse attention's host decisions (include/moekit/attention.h), without a GPU so the CPU
// tests pin them (tests/cpu/test_attention_plan.cpp): argument checks, how each token's key list
// is split over CTAs, where the splits' partials go, and the workspace they need.
#pragma once
#include <cstddef>
#include <cstdint>

#include "moekit/attention.h"

namespace moekit::detail {

/// Keys per tile of the kernel (one wgmma N) and query heads per CTA (one wgmma M).
constexpr int kAttnTileKeys = 64;
constexpr int kAttnHeadsPerCta = 64;
/// Fewest keys a split is given: below it the merge costs more than the parallelism gains.
constexpr int kAttnMinSplitKeys = 128;
constexpr int kAttnMaxWindow = 128;

/// Each token's keys as one virtual list: top-k entries at [0, topk), the window's at
/// [window_offset, window_offset + window). Split s of a token covers [s · chunk, (s + 1) · chunk)
/// of it; splits [0, topk_splits) are the top-k's, the rest the window's (per-source partials:
/// the window starts on a split boundary; normalized: right after the top-k).
struct SparseAttentionPlan {
  int head_blocks = 0;    ///< ceil(heads / 64)
  int splits = 1;         ///< per token
  int topk_splits = 0;    ///< the first splits that read only top-k entries (per-source partials)
  int chunk = 0;          ///< keys per split (a multiple of 64)
  int window_offset = 0;  ///< virtual index of window entry 0
  /// The kernel writes the final bf16 o (normalized, one split) or each source's partial straight
  /// into the caller's arrays (one split per source); otherwise splits go to the workspace and a
  /// merge follows.
  bool direct = true;
  size_t workspace_bytes = 0;   ///< partial o [splits, T, heads, dim] f32, then lse [splits, T, heads]
  size_t workspace_lse_offset = 0;
};

/// Checks the shape fields of `args` and `kv` (kInvalidArgument / kMisaligned, the
/// message naming the field) — pointers, alignment, dims, counts — the device data are not read.
void validate_sparse_attention(const SparseAttentionArgs& args, const AttentionKv& kv, const char* fn);
/// The mixed cache's strides: nope and rope multiples of 16 and at least a row (448 / 128 bytes),
/// scales a multiple of 4 and at least 28 (kInvalidArgument naming the field).
void validate_mixed_kv_strides(const MixedKvCache& c, const char* fn);
/// The shape checks alone (no cache), for the workspace query.
void validate_sparse_attention_shape(const SparseAttentionArgs& args, const char* fn);

/// The plan for `args` on a GPU with `num_sms` SMs: one split per token when T · head_blocks
/// CTAs fill the SMs, else as many as fill them, each ≥ kAttnMinSplitKeys keys.
SparseAttentionPlan plan_sparse_attention(const SparseAttentionArgs& args, AttentionOutput mode, int num_sms);

/// plan_sparse_attention after the checks that need the plan: a known `mode`, and T · splits ·
/// head_blocks CTAs within one grid (kInvalidArgument). What the workspace query and the call share.
SparseAttentionPlan checked_plan(const SparseAttentionArgs& args, AttentionOutput mode, int num_sms, const char* fn);

}  // namespace moekit::detail
