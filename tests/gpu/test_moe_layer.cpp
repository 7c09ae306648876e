// GPU tests of the public MoE layer (include/moekit/moe_layer.h) against the float64 reference of
// SPEC §3 (src/moe/moe_reference.h): every SPEC §5 preset (experts scaled down, H and I real for
// the DeepSeek-like, gpt-oss, qwen3-30b and deepseek-v2-lite shapes), T ∈ {0, 1, 2, 7, 64} with
// every row checked, large T (1000, 4096) with a random sample of rows; the targeted cases of
// SPEC §3 (duplicates, -1 and invalid ids, every token on one expert, EP halves, k = 1, the clamp,
// NaN rows, dropped tokens, empty experts) and argument errors. Paths that must agree (logits vs
// ids, graph replay vs eager, gathered vs permuted, run to run): test_moe_layer_paths.cpp.
// y is poisoned (0xFF bytes) before every run so an unwritten row cannot pass; each case prints
// its measured error ("[ moe_layer ] ... rel_l2=").
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "moe_layer_harness.h"

using namespace moe_layer_test;

namespace {
struct Preset {
  const char* name;
  int e, k;
  int64_t h, inter;
  RoutingMethod method;
  bool renormalize;
  int groups, keep;
  float scale, limit;
  std::vector<int64_t> full_t;    ///< token counts with every row checked
  std::vector<int64_t> sample_t;  ///< token counts with kSampleRows rows checked
};

std::vector<Preset> presets() {
  const auto sm = RoutingMethod::kSoftmaxTopk;
  return {
      // DeepSeek-V3 shape (H = 7168, I = 2048) with 16 experts in 8 groups (keep 4): few tokens.
      {"deepseek-v3 (E=16, H/I real)",
       16,
       8,
       7168,
       2048,
       RoutingMethod::kSigmoidGrouped,
       true,
       8,
       4,
       2.5f,
       0.0f,
       {0, 1, 2, 7},
       {64}},
      {"kimi-k2 (E=24, H=1024 I=512)",
       24,
       8,
       1024,
       512,
       RoutingMethod::kSigmoidGrouped,
       true,
       1,
       1,
       2.827f,
       0.0f,
       {0, 1, 2, 7, 64},
       {}},
      {"qwen3-235b-a22b (E=16, H=1024 I=384)", 16, 8, 1024, 384, sm, true, 1, 1, 1.0f, 0.0f, {0, 1, 2, 7, 64}, {}},
      {"qwen3-30b-a3b (E=32, H/I real)", 32, 8, 2048, 768, sm, true, 1, 1, 1.0f, 0.0f, {0, 1, 2, 7, 64}, {1000, 4096}},
      {"mixtral-8x7b (E=8, H=1024 I=3584)", 8, 2, 1024, 3584, sm, true, 1, 1, 1.0f, 0.0f, {0, 1, 2, 7, 64}, {}},
      // gpt-oss: H = I = 2880 (22.5 x 128), clamp 7.
      {"gpt-oss-120b (E=16, H/I real)",
       16,
       4,
       2880,
       2880,
       RoutingMethod::kTopkSoftmax,
       false,
       1,
       1,
       1.0f,
       7.0f,
       {0, 1, 2, 7, 64},
       {1000, 4096}},
      {"deepseek-v2-lite (E=64, H/I real)", 64, 6, 2048, 1408, sm, false, 1, 1, 1.0f, 0.0f, {0, 1, 2, 7, 64}, {}},
  };
}

TEST(MoeLayer, PresetsMatchSpecReference) {
  moekit::test::Stream s;
  uint64_t seed = 1000;
  for (const Preset& p : presets()) {
    SCOPED_TRACE(p.name);
    MoeConfig c = small_config(p.e, p.k, p.h, p.inter, false);  // the default (fast) mode
    c.limit = p.limit;
    RoutingConfig r;
    r.method = p.method;
    r.renormalize = p.renormalize;
    DeviceBuffer bias(size_t(p.e) * 4);
    if (p.method == RoutingMethod::kSigmoidGrouped) {
      r.num_groups = p.groups;
      r.topk_groups = p.keep;
      r.routed_scaling_factor = p.scale;
      moekit::detail::fill_random_f32(bias.as<float>(), p.e, -0.01f, 0.01f, seed, nullptr);
      r.correction_bias = bias.as<float>();
    }
    c.routing = r;
    const Weights W(p.e, p.h, p.inter, seed += 10);
    const Layer L(c, W, s);
    std::vector<int64_t> ts = p.full_t;
    ts.insert(ts.end(), p.sample_t.begin(), p.sample_t.end());
    for (int64_t t : ts) {
      SCOPED_TRACE(::testing::Message() << "T=" << t);
      const bool full = std::find(p.full_t.begin(), p.full_t.end(), t) != p.full_t.end();
      Inputs in = make_x(t, p.h, seed += 3);
      random_logits(in, c, seed += 3);
      const Result res = run(L, in, true, s);
      EXPECT_EQ(res.invalid, 0);
      if (t == 0) {
        for (uint16_t v : res.y) EXPECT_EQ(v, 0xFFFF) << "T = 0 must leave y untouched";
        continue;
      }
      const Check ch = check_rows(L, in, res, full ? all_rows(t) : sample_rows(t, kSampleRows, seed), p.name);
      EXPECT_EQ(ch.nonfinite, 0);
      expect_accurate(ch);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Targeted cases (caller ids)
// ---------------------------------------------------------------------------------------------

TEST(MoeLayer, DuplicatesMinusOneAndInvalidIds) {
  moekit::test::Stream s;
  const Weights W(16, 512, 256, 1);
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    const MoeConfig c = small_config(16, 4, 512, 256, det);
    const Layer L(c, W, s);
    for (int64_t t : {1, 2, 7, 64, 1000}) {
      Inputs in = make_x(t, c.hidden, 10 + uint64_t(t));
      random_ids(in, c, 20 + uint64_t(t), true);
      const Result r = run(L, in, false, s);
      EXPECT_EQ(r.invalid, count_invalid(in.ids, c.num_experts)) << "T=" << t;
      const Check ch = check_rows(L, in, r, t <= 64 ? all_rows(t) : sample_rows(t, 64, 3), "ids with -1/invalid/dups");
      EXPECT_EQ(ch.nonfinite, 0);
      SCOPED_TRACE(::testing::Message() << "T=" << t);
      expect_accurate(ch);
      expect_dropped_rows_zero(L, in, r);
    }
  }
}

TEST(MoeLayer, AllTokensOnOneExpertAndEmptyExperts) {
  moekit::test::Stream s;
  const Weights W(16, 512, 256, 2);
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    const MoeConfig c = small_config(16, 4, 512, 256, det);
    const Layer L(c, W, s);
    for (int64_t t : {1, 64, 300}) {
      Inputs in = make_x(t, c.hidden, 30 + uint64_t(t));
      in.ids.assign(size_t(t * c.top_k), 5);
      in.w.assign(in.ids.size(), 0.25f);
      const Result r = run(L, in, false, s);
      EXPECT_EQ(r.invalid, 0);
      const Check ch = check_rows(L, in, r, all_rows(t), "all slots on expert 5");
      EXPECT_EQ(ch.nonfinite, 0);
      expect_accurate(ch);
    }
    // Every expert empty: every slot -1 → y = 0 everywhere (with the fused finalize no GEMM2 tile
    // runs, so CTA 0 writes the zeros).
    for (int64_t t : {1, 33}) {
      Inputs in = make_x(t, c.hidden, 40);
      in.ids.assign(size_t(t * c.top_k), -1);
      in.w.assign(in.ids.size(), 1.0f);
      const Result r = run(L, in, false, s);
      EXPECT_EQ(r.invalid, 0);
      for (uint16_t v : r.y) ASSERT_EQ(moekit::bf16_to_float(v), 0.0f);
    }
  }
}

TEST(MoeLayer, ZeroTokens) {
  moekit::test::Stream s;
  MoeConfig c = small_config();
  c.routing = RoutingConfig{};
  const Weights W(16, 512, 256, 3);
  const Layer L(c, W, s);
  EXPECT_EQ(L.layer.workspace_size(0), 0u);
  Inputs in = make_x(0, c.hidden, 1);
  const Result r = run(L, in, false, s);
  EXPECT_EQ(r.invalid, 0) << "invalid_count is set to 0 for T = 0";
  for (uint16_t v : r.y) EXPECT_EQ(v, 0xFFFF);
  random_logits(in, c, 2);
  const Result r2 = run(L, in, true, s);
  for (uint16_t v : r2.y) EXPECT_EQ(v, 0xFFFF);
}

TEST(MoeLayer, ExpertParallelHalvesSumToTheWholeLayer) {
  moekit::test::Stream s;
  const Weights W(16, 512, 256, 4);
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    const MoeConfig full_cfg = small_config(16, 4, 512, 256, det);
    const Layer full(full_cfg, W, s);
    MoeConfig lo = full_cfg, hi = full_cfg;
    lo.local_offset = 0;
    lo.local_count = 8;
    hi.local_offset = 8;
    hi.local_count = 8;
    const Layer L0(lo, W, s), L1(hi, W, s);
    for (int64_t t : {1, 7, 64, 1000}) {
      Inputs in = make_x(t, full_cfg.hidden, 50 + uint64_t(t));
      random_ids(in, full_cfg, 60 + uint64_t(t), true);
      const Result rf = run(full, in, false, s), r0 = run(L0, in, false, s), r1 = run(L1, in, false, s);
      const int32_t want = count_invalid(in.ids, 16);
      EXPECT_EQ(r0.invalid, want) << "every rank reports the whole batch's invalid ids";
      EXPECT_EQ(r1.invalid, want);
      EXPECT_EQ(rf.invalid, want);
      const auto rows = t <= 64 ? all_rows(t) : sample_rows(t, 32, 5);
      expect_accurate(check_rows(L0, in, r0, rows, "EP half [0, 8)"));
      expect_accurate(check_rows(L1, in, r1, rows, "EP half [8, 16)"));
      // ~6% of tokens have all 4 slots in the other half (or -1 / invalid): y = 0 exactly.
      const int64_t dropped = expect_dropped_rows_zero(L0, in, r0) + expect_dropped_rows_zero(L1, in, r1);
      if (t >= 64) EXPECT_GT(dropped, 0) << "the case should contain tokens with no local slot";
      std::vector<float> sum(rf.y.size());
      std::vector<double> whole(rf.y.size());
      for (size_t i = 0; i < sum.size(); ++i) {
        sum[i] = moekit::bf16_to_float(r0.y[i]) + moekit::bf16_to_float(r1.y[i]);
        whole[i] = moekit::bf16_to_float(rf.y[i]);
      }
      const double rel = moekit::relative_l2_error(sum.data(), whole.data(), sum.size());
      std::printf("[ moe_layer ] EP halves summed vs whole layer            T=%-5lld rel_l2=%.3e\n", (long long)t, rel);
      EXPECT_LE(rel, kEpSumBound) << "T=" << t;
    }
  }
}

TEST(MoeLayer, TopOneAndClamp) {
  moekit::test::Stream s;
  // k = 1 with 32 experts.
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    const MoeConfig c = small_config(32, 1, 1024, 512, det);
    const Weights W(32, 1024, 512, 5);
    const Layer L(c, W, s);
    for (int64_t t : {1, 7, 64}) {
      Inputs in = make_x(t, c.hidden, 70 + uint64_t(t));
      random_ids(in, c, 80 + uint64_t(t), false);
      const Check ch = check_rows(L, in, run(L, in, false, s), all_rows(t), "k = 1");
      EXPECT_EQ(ch.nonfinite, 0);
      expect_accurate(ch);
    }
  }
  // The clamp on and off, with W1 scales large enough that |g|, |u| often exceed the limit.
  const Weights W(16, 512, 256, 6, 2e-3f, 4e-3f);
  std::vector<uint16_t> y_off, y_on;
  for (float limit : {0.0f, 1.0f}) {
    MoeConfig c = small_config(16, 4, 512, 256, false);
    c.limit = limit;
    const Layer L(c, W, s);
    Inputs in = make_x(64, c.hidden, 90);
    random_ids(in, c, 91, false);
    const Result r = run(L, in, false, s);
    const Check ch = check_rows(L, in, r, all_rows(64), limit > 0 ? "clamp 1.0 (large g/u)" : "no clamp (large g/u)");
    EXPECT_EQ(ch.nonfinite, 0);
    expect_accurate(ch);
    (limit > 0 ? y_on : y_off) = r.y;
  }
  EXPECT_NE(y_on, y_off) << "the clamp must change the output";
}

TEST(MoeLayer, NanRowsStayLocal) {
  moekit::test::Stream s;
  const Weights W(16, 512, 256, 7);
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    const MoeConfig c = small_config(16, 4, 512, 256, det);
    const Layer L(c, W, s);
    const int64_t t = 64;
    Inputs in = make_x(t, c.hidden, 100);
    random_ids(in, c, 101, false);
    const Result clean = run(L, in, false, s);
    // NaN in one element of row 5, +Inf in row 40.
    const int64_t nan_row = 5, inf_row = 40;
    auto poke = [&](int64_t row, int64_t col, uint16_t bits) {
      in.hx[size_t(row * c.hidden + col)] = bits;
      ASSERT_EQ(cudaMemcpy(in.x.as<uint16_t>() + row * c.hidden + col, &bits, 2, cudaMemcpyHostToDevice), cudaSuccess);
    };
    poke(nan_row, 77, 0x7FC0);
    poke(inf_row, 300, 0x7F80);
    const Result dirty = run(L, in, false, s);
    for (int64_t i = 0; i < t; ++i) {
      bool nonfinite = false, same = true;
      for (int64_t col = 0; col < c.hidden; ++col) {
        const size_t at = size_t(i * c.hidden + col);
        nonfinite |= !std::isfinite(moekit::bf16_to_float(dirty.y[at]));
        same &= dirty.y[at] == clean.y[at];
      }
      if (i == nan_row || i == inf_row) {
        EXPECT_TRUE(nonfinite) << "row " << i << " must show its NaN/Inf";
      } else if (det) {
        EXPECT_TRUE(same) << "row " << i << " changed by another row's NaN/Inf";
      } else {  // the scatter-add order may vary run to run: only finiteness is exact
        EXPECT_FALSE(nonfinite) << "row " << i << " got another row's NaN/Inf";
      }
    }
  }
}

TEST(MoeLayer, WorkspaceAndArgumentErrors) {
  moekit::test::Stream s;
  const MoeConfig c = small_config(16, 4, 512, 256, false);
  const Weights W(16, 512, 256, 8);
  const Layer L(c, W, s);
  const int64_t t = 7;
  size_t prev = 0;
  for (int64_t tt : {1, 2, 7, 64, 1000, 4096, 16384}) {
    EXPECT_GE(L.layer.workspace_size(tt), prev);
    prev = L.layer.workspace_size(tt);
  }
  Inputs in = make_x(t, c.hidden, 110);
  random_ids(in, c, 111, false);
  const size_t need = L.layer.workspace_size(t);
  DeviceBuffer ws(need), y(size_t(t * c.hidden * 2)), ids(size_t(t * c.top_k * 4)), w(size_t(t * c.top_k * 4));
  moekit::MoeForwardArgs a = ids_forward_args(in, y, ids, w, ws);
  a.workspace_bytes = need - 1;
  try {
    L.layer.forward(a, s);
    ADD_FAILURE() << "a too small workspace was accepted";
  } catch (const moekit::Error& e) {
    EXPECT_EQ(e.code(), moekit::ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("workspace too small"), std::string::npos) << e.what();
  }
  a.workspace_bytes = need;
  a.x = static_cast<const char*>(in.x.get()) + 8;
  EXPECT_THROW(L.layer.forward(a, s), moekit::Error);
  a.x = in.x.get();
  a.y = in.x.get();  // y overlaps x
  EXPECT_THROW(L.layer.forward(a, s), moekit::Error);
  a.y = y.get();
  a.workspace = static_cast<char*>(ws.get()) + 16;
  EXPECT_THROW(L.layer.forward(a, s), moekit::Error);
  moekit::test::finish(s, "nothing launched");
}

}  // namespace
