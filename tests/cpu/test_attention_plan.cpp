// The sparse attention's host decisions (src/planning/attention_plan.h): how key lists are split
// over CTAs, where partials go, the workspace, and argument checks before any launch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "moekit/attention.h"
#include "moekit/error.h"
#include "planning/attention_plan.h"

namespace {

using moekit::AttentionOutput;
using moekit::ErrorCode;
using moekit::SparseAttentionArgs;
using moekit::detail::plan_sparse_attention;

const void* fake(uintptr_t a) { return reinterpret_cast<const void*>(a); }

SparseAttentionArgs decode(int64_t tokens, int heads, int topk, int window) {
  SparseAttentionArgs a;
  a.q = fake(0x10000);
  a.num_tokens = tokens;
  a.heads = heads;
  a.dim = 512;
  a.softmax_scale = 0.0442f;
  a.topk = topk;
  a.topk_indices = static_cast<const int32_t*>(fake(0x20000));
  a.window = window;
  a.window_indices = window > 0 ? static_cast<const int32_t*>(fake(0x30000)) : nullptr;
  a.num_requests = window > 0 ? tokens : 0;
  return a;
}

TEST(AttentionPlan, FullGridsAreNotSplit) {
  // 64 tokens x 2 head blocks fill 132 SMs within a wave: one split, written directly.
  const auto p = plan_sparse_attention(decode(66, 128, 2048, 128), AttentionOutput::kNormalized, 132);
  EXPECT_EQ(p.head_blocks, 2);
  EXPECT_EQ(p.splits, 1);
  EXPECT_TRUE(p.direct);
  EXPECT_EQ(p.workspace_bytes, 0u);
  EXPECT_EQ(p.window_offset, 2048);
  EXPECT_GE(p.chunk, 2048 + 128);
}

TEST(AttentionPlan, SmallBatchesSplitKeysToFillTheGpu) {
  const auto p = plan_sparse_attention(decode(1, 128, 2048, 128), AttentionOutput::kNormalized, 132);
  EXPECT_EQ(p.head_blocks, 2);
  EXPECT_GT(p.splits, 1);
  EXPECT_LE(p.splits * p.head_blocks, 132);
  EXPECT_EQ(p.chunk % 64, 0);
  EXPECT_GE(p.chunk, moekit::detail::kAttnMinSplitKeys);
  EXPECT_GE(int64_t(p.splits) * p.chunk, 2048 + 128);         // every key covered
  EXPECT_LT(int64_t(p.splits - 1) * p.chunk, 2048 + 128);     // no empty split
  EXPECT_FALSE(p.direct);
  const size_t rows = size_t(p.splits) * 128;
  EXPECT_GE(p.workspace_lse_offset, rows * 512 * 4);
  EXPECT_GE(p.workspace_bytes, p.workspace_lse_offset + rows * 4);
}

TEST(AttentionPlan, PartialsGiveEachSourceItsOwnSplits) {
  // Enough tokens: one split per source, straight into the caller's partials.
  auto p = plan_sparse_attention(decode(200, 64, 300, 100), AttentionOutput::kPerSourcePartials, 132);
  EXPECT_EQ(p.topk_splits, 1);
  EXPECT_EQ(p.splits, 2);
  EXPECT_TRUE(p.direct);
  EXPECT_EQ(p.window_offset % p.chunk, 0);
  EXPECT_GE(p.window_offset, 300);
  // Few tokens: several splits per source, merged per source from the workspace.
  p = plan_sparse_attention(decode(1, 64, 1000, 128), AttentionOutput::kPerSourcePartials, 132);
  EXPECT_GT(p.topk_splits, 1);
  EXPECT_EQ(p.window_offset, p.topk_splits * p.chunk);
  EXPECT_GE(int64_t(p.topk_splits) * p.chunk, 1000);
  EXPECT_GE(p.splits - p.topk_splits, 1);
  EXPECT_FALSE(p.direct);
  // A source with no keys still gets its split (which writes o = 0, lse = −inf).
  p = plan_sparse_attention(decode(200, 64, 0, 0), AttentionOutput::kPerSourcePartials, 132);
  EXPECT_EQ(p.topk_splits, 1);
  EXPECT_EQ(p.splits, 2);
}

TEST(AttentionPlan, CheckedPlanRejectsUnknownModesAndHugeGrids) {
  const auto code = [](const SparseAttentionArgs& a, AttentionOutput mode) {
    try {
      moekit::detail::checked_plan(a, mode, 132, "test");
    } catch (const moekit::Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code(decode(64, 128, 2048, 128), AttentionOutput::kNormalized), ErrorCode::kInternal);
  EXPECT_EQ(code(decode(64, 128, 2048, 128), static_cast<AttentionOutput>(7)), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(decode(int64_t(1) << 31, 128, 64, 0), AttentionOutput::kNormalized), ErrorCode::kInvalidArgument);
}

ErrorCode code_of(const SparseAttentionArgs& a, const moekit::AttentionKv& kv) {
  try {
    moekit::detail::validate_sparse_attention(a, kv, "test");
  } catch (const moekit::Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;  // "did not throw"
}

TEST(AttentionPlan, BadArgumentsAreRejectedByName) {
  moekit::AttentionKv kv;
  kv.format = moekit::KvFormat::kBf16;
  kv.bf16 = fake(0x40000);
  kv.num_entries = 100;
  EXPECT_EQ(code_of(decode(4, 128, 64, 0), kv), ErrorCode::kInternal);  // valid
  auto a = decode(4, 128, 64, 0);
  a.dim = 576;
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(4, 128, 64, 0);
  a.softmax_scale = NAN;
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(4, 128, 64, 129);
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);  // window > 128
  a = decode(4, 128, 64, 0);
  a.softmax_scale = 2e6f;  // base-2 scores would overflow
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(4, 128, (1 << 28) - 64, 64);  // a token's keys must stay well inside int
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(int64_t(1) << 57, 128, 64, 0);  // T · heads would overflow int64
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(4, 128, 64, 16);
  a.token_request = static_cast<const int32_t*>(fake(0x70000));
  a.num_requests = 0;  // every token's request is out of range: no window, not an error
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInternal);
  a = decode(4, 128, 64, 0);
  a.topk_indices = nullptr;
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(4, 128, 64, 16);
  a.num_requests = 3;  // no token_request: one request per token
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(4, 128, 64, 16);
  a.window_positions = static_cast<const int32_t*>(fake(0x50000));  // causal without query positions
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInvalidArgument);
  a = decode(4, 128, 64, 0);
  a.q = fake(0x10008);
  EXPECT_EQ(code_of(a, kv), ErrorCode::kMisaligned);
  a = decode(4, 128, 64, 0);
  a.dim = 256;
  moekit::AttentionKv mixed;
  mixed.format = moekit::KvFormat::kMixedFp8;
  mixed.mixed.num_entries = 10;
  EXPECT_EQ(code_of(a, mixed), ErrorCode::kInvalidArgument);  // the mixed cache is dim 512
  a.dim = 512;
  EXPECT_EQ(code_of(a, mixed), ErrorCode::kInvalidArgument);  // its arrays missing
  // The mixed cache's strides: one 640-byte row per entry is fine; rows shorter than an entry's
  // part or off the 16-byte (nope, rope) / 4-byte (scales) grid are not.
  mixed.mixed = moekit::MixedKvCache{static_cast<uint8_t*>(const_cast<void*>(fake(0x60000))),
                                     static_cast<float*>(const_cast<void*>(fake(0x60000 + 576))),
                                     const_cast<void*>(fake(0x60000 + 448)), 10, 640, 640, 640};
  EXPECT_EQ(code_of(a, mixed), ErrorCode::kInternal);  // valid
  for (auto bad : {&moekit::MixedKvCache::nope_stride, &moekit::MixedKvCache::rope_stride}) {
    moekit::AttentionKv b = mixed;
    b.mixed.*bad = 632;  // not a multiple of 16
    EXPECT_EQ(code_of(a, b), ErrorCode::kInvalidArgument);
    b.mixed.*bad = 112;  // shorter than a row
    EXPECT_EQ(code_of(a, b), ErrorCode::kInvalidArgument);
  }
  moekit::AttentionKv bad_scales = mixed;
  bad_scales.mixed.scales_stride = 26;
  EXPECT_EQ(code_of(a, bad_scales), ErrorCode::kInvalidArgument);
  moekit::AttentionKv unaligned = kv;
  unaligned.bf16 = fake(0x40004);
  EXPECT_EQ(code_of(decode(4, 128, 64, 0), unaligned), ErrorCode::kMisaligned);
  // No tokens: nothing is checked beyond the counts, nothing runs.
  a = decode(0, 128, 64, 0);
  a.q = nullptr;
  EXPECT_EQ(code_of(a, kv), ErrorCode::kInternal);
}

}  // namespace
