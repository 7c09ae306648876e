// The expert-parallel layer's host decisions (planning/ep_plan.h): which configurations it
// rejects and why, each rank's local slice, and the workspace layout of both modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "moekit/error.h"
#include "moekit/numerics.h"
#include "planning/ep_plan.h"

namespace {

using moekit::MoeEpConfig;
using moekit::MoeEpMode;
using moekit::detail::ep_local_config;
using moekit::detail::ep_workspace_plan;
using moekit::detail::EpWorkspacePlan;

MoeEpConfig deepseek(MoeEpMode mode, int64_t cap) {
  MoeEpConfig c;
  c.layer.num_experts = 256;
  c.layer.top_k = 8;
  c.layer.hidden = 7168;
  c.layer.inter = 2048;
  c.mode = mode;
  c.max_tokens_per_rank = cap;
  return c;
}

// The message of the kInvalidArgument that `c` raises on rank 0 of `world`, or "" if none.
std::string rejection(const MoeEpConfig& c, int world) {
  try {
    ep_local_config(c, 0, world);
  } catch (const moekit::Error& e) {
    EXPECT_EQ(e.code(), moekit::ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(EpPlan, EachRankGetsItsSliceWithCallerIdsAndGatheredRows) {
  for (int world : {1, 2, 4, 8}) {
    for (int rank = 0; rank < world; ++rank) {
      MoeEpConfig c = deepseek(MoeEpMode::kLowLatency, 128);
      c.layer.routing = moekit::RoutingConfig{};
      const moekit::MoeConfig l = ep_local_config(c, rank, world);
      EXPECT_EQ(l.local_count, 256 / world);
      EXPECT_EQ(l.local_offset, rank * 256 / world);
      EXPECT_FALSE(l.routing.has_value()) << "the owners get ids, never logits";
      EXPECT_EQ(l.gemm1_input, moekit::MoeGemm1Input::kGathered);
      EXPECT_EQ(l.num_experts, 256);
    }
  }
}

TEST(EpPlan, RejectsWhatTheLayerCannotRun) {
  const MoeEpConfig ok = deepseek(MoeEpMode::kHighThroughput, 64);
  EXPECT_EQ(rejection(ok, 4), "");
  const std::vector<std::pair<std::string, void (*)(MoeEpConfig&)>> cases = {
      {"num_experts", [](MoeEpConfig& c) { c.layer.num_experts = 250; }},
      {"local_offset", [](MoeEpConfig& c) { c.layer.local_count = 64; }},
      {"local_offset", [](MoeEpConfig& c) { c.layer.local_offset = 64; }},
      {"kPermuted", [](MoeEpConfig& c) { c.layer.gemm1_input = moekit::MoeGemm1Input::kPermuted; }},
      {"inter", [](MoeEpConfig& c) { c.layer.inter = 2016; }},
      {"max_tokens_per_rank", [](MoeEpConfig& c) { c.max_tokens_per_rank = 0; }},
      {"too large", [](MoeEpConfig& c) { c.max_tokens_per_rank = int64_t(1) << 18; }},  // 4 · 2^18 · 7168 ≥ 2^32
      {"top_k", [](MoeEpConfig& c) { c.layer.top_k = 300; }},                             // MoeLayer::validate
  };
  for (const auto& [word, edit] : cases) {
    MoeEpConfig c = ok;
    edit(c);
    const std::string msg = rejection(c, 4);
    EXPECT_NE(msg.find(word), std::string::npos) << "expected '" << word << "' in: " << msg;
  }
  MoeEpConfig mx = ok;  // MXFP4 experts (DeepSeek-V4's, gpt-oss's) are taken
  mx.layer.weight_format = moekit::MoeWeightFormat::kMxfp4;
  EXPECT_EQ(rejection(mx, 4), "");
  mx.layer.hidden = 7184;  // MoeLayer's MXFP4 rule: H a multiple of 32
  EXPECT_NE(rejection(mx, 4), "");
  EXPECT_NE(rejection(ok, moekit::detail::kEpMaxRanks + 1).find("ranks"), std::string::npos);
  EXPECT_THROW(ep_local_config(ok, 4, 4), moekit::Error);
  EXPECT_THROW(ep_local_config(ok, -1, 4), moekit::Error);
}

// Every region 256-byte aligned, in order, none overlapping the next, the total covering the last.
void expect_well_formed(const EpWorkspacePlan& p) {
  const std::vector<size_t> offsets = {p.ids,     p.weights,  p.invalid,  p.send_x,   p.send_meta, p.pos,
                                       p.counts,  p.map,      p.ones,     p.recv_x,   p.recv_meta,
                                       p.recv_ids, p.recv_w,  p.recv_sx,  p.local_invalid, p.y_local, p.back,
                                       p.local_ws};
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i] % 256, 0u) << i;
    if (i) EXPECT_GE(offsets[i], offsets[i - 1]) << i;
  }
  EXPECT_EQ(p.bytes, p.local_ws + p.local_ws_bytes);
}

TEST(EpPlan, WorkspaceHoldsEveryBufferOfBothModes) {
  const int64_t h = 7168, k = 8, kb = moekit::ceil_div(h, int64_t(128)), words = kb + 2 * k;
  for (int world : {1, 2, 4, 8})
    for (int64_t cap : {1, 7, 128, 4096}) {
      const int64_t rows = cap * world;
      const MoeEpConfig ll = deepseek(MoeEpMode::kLowLatency, cap), ht = deepseek(MoeEpMode::kHighThroughput, cap);
      MoeEpConfig det = ll;
      det.layer.deterministic = true;
      const EpWorkspacePlan a = ep_workspace_plan(ll, world, 1000), b = ep_workspace_plan(ht, world, 1000),
                            d = ep_workspace_plan(det, world, 1000);
      for (const EpWorkspacePlan* p : {&a, &b, &d}) expect_well_formed(*p);
      // Low latency sends one block of C rows; high throughput one block per rank.
      EXPECT_GE(a.send_meta - a.send_x, size_t(cap * h));
      EXPECT_GE(b.send_meta - b.send_x, size_t(world * cap * h));
      EXPECT_GE(a.pos - a.send_meta, size_t(cap * words * 4));
      EXPECT_EQ(a.counts, a.pos) << "no token positions in low latency";
      EXPECT_GE(b.counts - b.pos, size_t(cap * world * 4));
      // Everything received: R rows and records, and the returned rows (k per token when deterministic).
      EXPECT_GE(a.recv_meta - a.recv_x, size_t(rows * h));
      EXPECT_GE(a.back - a.y_local, size_t(rows * h * 2));
      EXPECT_GE(d.back - d.y_local, size_t(rows * k * h * 2));
      EXPECT_GE(d.local_ws - d.back, size_t(rows * k * h * 2));
      EXPECT_EQ(a.ids, a.weights) << "no routed ids without a routing configuration";
    }
  MoeEpConfig routed = deepseek(MoeEpMode::kLowLatency, 64);
  routed.layer.routing = moekit::RoutingConfig{};
  const EpWorkspacePlan r = ep_workspace_plan(routed, 2, 0);
  EXPECT_GE(r.weights - r.ids, size_t(64 * k * 4));
  EXPECT_GE(r.invalid - r.weights, size_t(64 * k * 4));
}

}  // namespace
