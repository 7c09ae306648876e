// The MoE layer with MXFP4 expert weights (MoeWeightFormat::kMxfp4; docs/design.md §MXFP4 weights).
// Weights are checkpoint-like: bf16 N(0, 0.02²) quantized by the OCP MX rule on the device (the
// host quantizer's twin, checked here bit for bit). Their FP8 form (moekit::mxfp4_to_fp8 on the
// host) is the reference's weights, and an FP8 layer on that form must give the MXFP4 layer's y
// bit for bit in the deterministic mode: the kernels' expansion is that form. Cases: SPEC §5's
// shapes (experts scaled down) at T ∈ {1, 7, 64, 1000, 4096}; ids with -1 / invalid / duplicates,
// all on one expert, none; T = 0; EP halves; NaN rows; scales beyond the 15-binade window; graph
// replay vs eager; gpt-oss's interleaved W1 rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "moe/moe_gemm.h"
#include "moe_layer_harness.h"
#include "planning/moe_plan.h"
#include "runtime/knobs.h"
#include "moekit/mxfp4.h"

using namespace moe_layer_test;
using moekit::MoeWeightFormat;

namespace {

// FP8 form of E experts' MXFP4 matrices [n, k] (codes [E, n, k/2], scales [E, n, k/32]), one host
// thread per expert.
void fp8_form(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales, int64_t e, int64_t n, int64_t k,
              std::vector<uint8_t>& q, std::vector<float>& sb) {
  const int64_t nsb = moekit::ceil_div(n, 128) * moekit::ceil_div(k, 128);
  q.resize(size_t(e * n * k));
  sb.resize(size_t(e * nsb));
  std::vector<std::thread> pool;
  for (int64_t x = 0; x < e; ++x)
    pool.emplace_back([&, x] {
      moekit::mxfp4_to_fp8(codes.data() + x * n * (k / 2), k / 2, scales.data() + x * n * (k / 32), k / 32, n, k,
                           q.data() + x * n * k, k, sb.data() + x * nsb);
    });
  for (auto& th : pool) th.join();
}

/// MXFP4 weights of `e` experts on the device (codes and scales) and their FP8 form (`fp8`: the
/// reference's weights and the FP8 layer's). `edit` may change the scales on the host first.
struct MxWeights {
  int64_t e, h, inter;
  DeviceBuffer c1, s1, c2, s2;
  std::unique_ptr<Weights> fp8;
  template <class Edit>
  MxWeights(int64_t experts, int64_t hidden, int64_t i, uint64_t seed, Edit edit) : e(experts), h(hidden), inter(i) {
    c1 = DeviceBuffer(size_t(e * 2 * i * h / 2));
    s1 = DeviceBuffer(size_t(e * 2 * i * h / 32));
    c2 = DeviceBuffer(size_t(e * h * i / 2));
    s2 = DeviceBuffer(size_t(e * h * i / 32));
    moekit::detail::fill_checkpoint_mxfp4(c1.as<uint8_t>(), s1.as<uint8_t>(), e, 2 * i, h, 0.02f, seed + 1, nullptr);
    moekit::detail::fill_checkpoint_mxfp4(c2.as<uint8_t>(), s2.as<uint8_t>(), e, h, i, 0.02f, seed + 2, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto hc1 = c1.download<uint8_t>(c1.bytes()), hc2 = c2.download<uint8_t>(c2.bytes());
    auto hs1 = s1.download<uint8_t>(s1.bytes()), hs2 = s2.download<uint8_t>(s2.bytes());
    edit(hs1, hs2);
    s1.upload(hs1);
    s2.upload(hs2);
    std::vector<uint8_t> q1, q2;
    std::vector<float> sb1, sb2;
    fp8_form(hc1, hs1, e, 2 * i, h, q1, sb1);
    fp8_form(hc2, hs2, e, h, i, q2, sb2);
    fp8 = std::make_unique<Weights>(e, h, i, std::move(q1), std::move(sb1), std::move(q2), std::move(sb2));
  }
  MxWeights(int64_t experts, int64_t hidden, int64_t i, uint64_t seed)
      : MxWeights(experts, hidden, i, seed, [](std::vector<uint8_t>&, std::vector<uint8_t>&) {}) {}
  /// Device MXFP4 weights of experts [first, ...).
  moekit::MoeWeights slice(int first) const {
    moekit::MoeWeights w;
    w.w1 = c1.as<uint8_t>() + first * 2 * inter * h / 2;
    w.w1_scales = s1.as<uint8_t>() + first * 2 * inter * h / 32;
    w.w2 = c2.as<uint8_t>() + first * h * inter / 2;
    w.w2_scales = s2.as<uint8_t>() + first * h * inter / 32;
    return w;
  }
};

MoeConfig mx_config(MoeConfig c) {
  c.weight_format = MoeWeightFormat::kMxfp4;
  return c;
}

/// The MXFP4 layer (deterministic) against the FP8 layer on the FP8 form: y bit for bit. Both run
/// GEMM1 with chains of 64 (the automatic choice differs between the formats at decode sizes).
void expect_equals_fp8_layer(const MoeConfig& det_cfg, const MxWeights& W, const Inputs& in, cudaStream_t s,
                             const char* what) {
  MoeConfig f = det_cfg;
  f.deterministic = true;
  f.gemm1_promote_k = 64;
  f.weight_format = MoeWeightFormat::kFp8;
  const Layer mx(mx_config(f), *W.fp8, W.slice(f.local_offset), s), fp8(f, *W.fp8, s);
  const Result a = run(mx, in, false, s), b = run(fp8, in, false, s);
  size_t diff = 0;
  for (size_t i = 0; i < a.y.size(); ++i) diff += a.y[i] != b.y[i];
  EXPECT_EQ(diff, 0u) << what << ": MXFP4 and FP8-form layers differ in " << diff << " of " << a.y.size()
                      << " outputs";
}

}  // namespace

TEST(MoeMxfp4, DeviceQuantizerMatchesTheHost) {
  const int64_t rows = 96, k = 2880;
  DeviceBuffer w(size_t(rows * k * 2)), codes(size_t(rows * k / 2)), scales(size_t(rows * k / 32));
  moekit::detail::fill_random_bf16_normal(w.get(), rows * k, 0.02f, 7, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> hw = w.download<uint16_t>(size_t(rows * k));
  for (int64_t j = 0; j < 32; ++j) hw[size_t(j)] = 0;  // an all-zero block, ties and a huge value
  hw[40] = moekit::bf16_from_float(3.0f * 0.25f);
  hw[41] = moekit::bf16_from_float(1e30f);
  hw[size_t(5 * k + 64)] = 0x7FC0;  // NaN: scale 255
  w.upload(hw);
  moekit::detail::quantize_mxfp4_bf16(w.get(), rows, k, codes.as<uint8_t>(), scales.as<uint8_t>(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> f(hw.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = moekit::bf16_to_float(hw[i]);
  std::vector<uint8_t> hc(size_t(rows * k / 2)), hs(size_t(rows * k / 32));
  moekit::quantize_mxfp4(f.data(), rows, k, k, hc.data(), k / 2, hs.data(), k / 32);
  EXPECT_EQ(codes.download<uint8_t>(hc.size()), hc);
  EXPECT_EQ(scales.download<uint8_t>(hs.size()), hs);
  EXPECT_EQ(hs[size_t(5 * k / 32 + 2)], 255);
}

// The device's FP8 form (benchmarks' baselines and references) is the host's, NaN scales included.
TEST(MoeMxfp4, DeviceFp8FormMatchesTheHost) {
  const int64_t e = 2, rows = 200, k = 2880;
  DeviceBuffer codes(size_t(e * rows * k / 2)), scales(size_t(e * rows * k / 32)), q(size_t(e * rows * k)),
      sb(size_t(e * moekit::ceil_div(rows, 128) * moekit::ceil_div(k, 128)) * 4);
  moekit::detail::fill_checkpoint_mxfp4(codes.as<uint8_t>(), scales.as<uint8_t>(), e, rows, k, 0.02f, 5, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto hc = codes.download<uint8_t>(codes.bytes());
  auto hs = scales.download<uint8_t>(scales.bytes());
  for (size_t i = 0; i < hs.size(); i += 97) hs[i] = uint8_t(hs[i] - 20);  // beyond the window
  hs[300] = 255;                                                          // a NaN scale
  scales.upload(hs);
  moekit::detail::mxfp4_to_fp8_device(codes.get(), scales.as<uint8_t>(), int(e), rows, k, q.get(), sb.as<float>(),
                                      nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> hq;
  std::vector<float> hsb;
  fp8_form(hc, hs, e, rows, k, hq, hsb);
  EXPECT_EQ(q.download<uint8_t>(hq.size()), hq);
  const auto dsb = sb.download<float>(hsb.size());
  for (size_t i = 0; i < hsb.size(); ++i) {
    if (std::isnan(hsb[i])) EXPECT_TRUE(std::isnan(dsb[i])) << i;
    else EXPECT_EQ(dsb[i], hsb[i]) << i;
  }
}

// Every preset's shapes, T ∈ {1, 7, 64, 1000, 4096}: the fast layer against the float64 reference
// (16 sampled rows), and the deterministic layer against the FP8 layer on the FP8 form.
TEST(MoeMxfp4, PresetsMatchTheReferenceAndTheFp8Form) {
  struct Shape {
    const char* name;
    int e, k;
    int64_t h, inter;
    float limit;
  };
  const Shape shapes[] = {{"deepseek-v3 (E=16, H/I real)", 16, 8, 7168, 2048, 0.0f},
                          {"gpt-oss-120b (E=16, H/I real)", 16, 4, 2880, 2880, 7.0f},
                          {"gpt-oss-20b (E=32, H/I real)", 32, 4, 2880, 2880, 7.0f},
                          {"qwen3-30b-a3b (E=32, H/I real)", 32, 8, 2048, 768, 0.0f},
                          {"mixtral-8x7b (E=8, H=1024 I=3584)", 8, 2, 1024, 3584, 0.0f},
                          {"deepseek-v2-lite (E=64, H/I real)", 64, 6, 2048, 1408, 0.0f},
                          {"kimi-k2 (E=24, H=1024 I=512)", 24, 8, 1024, 512, 0.0f}};
  moekit::test::Stream s;
  uint64_t seed = 500;
  for (const Shape& p : shapes) {
    SCOPED_TRACE(p.name);
    const MxWeights W(p.e, p.h, p.inter, seed += 10);
    MoeConfig c = small_config(p.e, p.k, p.h, p.inter, false);
    c.limit = p.limit;
    const Layer L(mx_config(c), *W.fp8, W.slice(0), s);
    for (int64_t t : {1, 7, 64, 1000, 4096}) {
      SCOPED_TRACE(::testing::Message() << "T=" << t);
      Inputs in = make_x(t, p.h, seed += 3);
      random_ids(in, c, seed += 3, false);
      const Result r = run(L, in, false, s);
      const Check ch = check_rows(L, in, r, sample_rows(t, kSampleRows, seed), std::string("mxfp4 ") + p.name);
      EXPECT_EQ(ch.nonfinite, 0);
      expect_accurate(ch);
      if (t == 1 || t == 64 || t == 4096) expect_equals_fp8_layer(c, W, in, s, p.name);
    }
  }
}

// SPEC §3's targeted cases on the MXFP4 layer, both modes.
TEST(MoeMxfp4, EdgeCases) {
  moekit::test::Stream s;
  const MxWeights W(16, 512, 256, 3);
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    const MoeConfig c = mx_config(small_config(16, 4, 512, 256, det));
    const Layer L(c, *W.fp8, W.slice(0), s);
    for (int64_t t : {1, 7, 64, 1000}) {  // duplicates, -1 and invalid ids
      Inputs in = make_x(t, c.hidden, 10 + uint64_t(t));
      random_ids(in, c, 20 + uint64_t(t), true);
      const Result r = run(L, in, false, s);
      EXPECT_EQ(r.invalid, count_invalid(in.ids, c.num_experts));
      expect_accurate(check_rows(L, in, r, t <= 64 ? all_rows(t) : sample_rows(t, 64, 3), "mxfp4 -1/invalid/dups"));
      expect_dropped_rows_zero(L, in, r);
      if (det) expect_equals_fp8_layer(c, W, in, s, "ids with -1/invalid/dups");
    }
    {  // every slot on one expert, then every slot -1
      Inputs in = make_x(300, c.hidden, 31);
      in.ids.assign(size_t(300 * c.top_k), 5);
      in.w.assign(in.ids.size(), 0.25f);
      expect_accurate(check_rows(L, in, run(L, in, false, s), sample_rows(300, 64, 4), "mxfp4 all on expert 5"));
      in.ids.assign(in.ids.size(), -1);
      for (uint16_t v : run(L, in, false, s).y) ASSERT_EQ(moekit::bf16_to_float(v), 0.0f);
    }
    {  // decode sizes (the decode GEMMs' 32-token tiles), every token on the same four experts:
       // 40 rows each, so each expert runs two token tiles
      Inputs in = make_x(40, c.hidden, 33);
      in.ids.resize(size_t(40 * c.top_k));
      for (size_t i = 0; i < in.ids.size(); ++i) in.ids[i] = int32_t(5 + i % 4);
      in.w.assign(in.ids.size(), 0.25f);
      expect_accurate(check_rows(L, in, run(L, in, false, s), all_rows(40), "mxfp4 40 rows on four experts"));
      if (det) expect_equals_fp8_layer(c, W, in, s, "40 rows on four experts");
    }
    {  // T = 0 leaves y untouched
      Inputs in = make_x(0, c.hidden, 1);
      for (uint16_t v : run(L, in, false, s).y) EXPECT_EQ(v, 0xFFFF);
    }
    {  // a NaN element in one row affects that row only
      Inputs in = make_x(64, c.hidden, 40);
      random_ids(in, c, 41, false);
      const uint16_t nan = 0x7FC0;
      in.hx[size_t(5 * c.hidden + 77)] = nan;
      ASSERT_EQ(cudaMemcpy(in.x.as<uint16_t>() + 5 * c.hidden + 77, &nan, 2, cudaMemcpyHostToDevice), cudaSuccess);
      const Result r = run(L, in, false, s);
      for (int64_t i = 0; i < 64; ++i) {
        bool finite = true;
        for (int64_t col = 0; col < c.hidden; ++col)
          finite &= std::isfinite(moekit::bf16_to_float(r.y[size_t(i * c.hidden + col)]));
        EXPECT_EQ(finite, i != 5) << "row " << i;
      }
    }
    // EP halves: each half against the reference of its experts, and bit for bit its FP8 form.
    for (int half = 0; half < 2; ++half) {
      MoeConfig hc = c;
      hc.local_offset = 8 * half;
      hc.local_count = 8;
      const Layer H(hc, *W.fp8, W.slice(hc.local_offset), s);
      Inputs in = make_x(200, c.hidden, 50 + uint64_t(half));
      random_ids(in, c, 60, true);
      const Result r = run(H, in, false, s);
      expect_accurate(check_rows(H, in, r, sample_rows(200, 64, 5), "mxfp4 EP half"));
      expect_dropped_rows_zero(H, in, r);
      if (det) expect_equals_fp8_layer(hc, W, in, s, "EP half");
    }
  }
}

// Blocks whose scales span more than 15 binades: their smallest 32-blocks round to E4M3
// subnormals in the FP8 form (docs/design.md §MXFP4 weights; bounded by the CPU tests). The
// layer computes exactly that form, and stays within the reference's bounds.
TEST(MoeMxfp4, ScalesBeyondTheWindowComputeTheFp8Form) {
  moekit::test::Stream s;
  const MxWeights W(8, 512, 256, 9, [](std::vector<uint8_t>& s1, std::vector<uint8_t>& s2) {
    for (size_t i = 0; i < s1.size(); i += 7) s1[i] = uint8_t(s1[i] - 18);  // 2^-18 of their neighbours
    for (size_t i = 3; i < s2.size(); i += 5) s2[i] = uint8_t(s2[i] - 25);
  });
  const MoeConfig c = mx_config(small_config(8, 2, 512, 256, false));
  const Layer L(c, *W.fp8, W.slice(0), s);
  Inputs in = make_x(64, c.hidden, 70);
  random_ids(in, c, 71, false);
  expect_accurate(check_rows(L, in, run(L, in, false, s), all_rows(64), "mxfp4 beyond the window"));
  expect_equals_fp8_layer(c, W, in, s, "scales beyond the window");
}

/// A forward of `L` on `in` captured in a CUDA graph, with the buffers it uses.
struct CapturedForward {
  DeviceBuffer ws, y, ids, w;
  cudaGraphExec_t exec = nullptr;
  CapturedForward(const Layer& L, const Inputs& in, cudaStream_t s)
      : ws(L.layer.workspace_size(in.t)), y(size_t(in.t * L.cfg().hidden * 2)), ids(DeviceBuffer::from(in.ids)),
        w(DeviceBuffer::from(in.w)) {
    L.layer.prepare_kernels(in.t, ws.get(), ws.bytes(), s);
    exec = capture_forward(L.layer, ids_forward_args(in, y, ids, w, ws), s);
  }
  ~CapturedForward() {
    if (exec) cudaGraphExecDestroy(exec);
  }
  /// Replays the graph on a poisoned y and returns y.
  std::vector<uint16_t> replay(cudaStream_t s) {
    EXPECT_EQ(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    moekit::test::finish(s, "graph replay");
    return y.download<uint16_t>(y.bytes() / 2);
  }
};

// A captured forward replays bit for bit what an eager one computes (deterministic mode).
TEST(MoeMxfp4, GraphReplayMatchesEager) {
  moekit::test::Stream s;
  const MxWeights W(16, 1024, 512, 11);
  const MoeConfig c = mx_config(small_config(16, 4, 1024, 512, true));
  const Layer L(c, *W.fp8, W.slice(0), s);
  for (int64_t t : {1, 64, 1000}) {
    SCOPED_TRACE(::testing::Message() << "T=" << t);
    Inputs in = make_x(t, c.hidden, 80 + uint64_t(t));
    random_ids(in, c, 90, false);
    const Result eager = run(L, in, false, s);
    CapturedForward g(L, in, s);
    ASSERT_NE(g.exec, nullptr);
    for (int replay = 0; replay < 2; ++replay) EXPECT_EQ(g.replay(s), eager.y) << "replay " << replay;
  }
}

// Both decode GEMMs in stream-K pieces (MOEKIT_MXFP4_STREAM_K=3; the plan runs GEMM2's alone) in a
// captured forward: every replay, with new activations in the same buffer, matches the reference of
// those activations, so GEMM1's hand-over flags start from zero in each (a stale flag hands over the
// previous replay's sums). H = 512, I = 256 at T = 1: 32 K-block units of GEMM1 for 32 CTAs, each
// tile in four pieces; I = 2048 at T = 64: 1024 units for 132 CTAs, so a CTA runs a tile's tail, a
// whole tile and the next one's head, and owners are helpers too.
TEST(MoeMxfp4, StreamKGraphReplaysFollowTheirInputs) {
  moekit::detail::Knobs k = moekit::detail::knobs();
  k.mxfp4_stream_k = 3;
  const moekit::detail::ScopedKnobs scope(k);
  moekit::test::Stream s;
  for (int64_t inter : {256, 2048}) {
    const MxWeights W(16, 512, inter, 23 + uint64_t(inter));
    const MoeConfig c = mx_config(small_config(16, 4, 512, inter, false));
    const Layer L(c, *W.fp8, W.slice(0), s);
    for (int64_t t : {1, 7, 64}) {
      SCOPED_TRACE(::testing::Message() << "I=" << inter << " T=" << t);
      Inputs in = make_x(t, c.hidden, 100 + uint64_t(t));
      random_ids(in, c, 110 + uint64_t(t), false);
      CapturedForward g(L, in, s);
      ASSERT_NE(g.exec, nullptr);
      for (int replay = 0; replay < 3; ++replay) {
        moekit::detail::fill_random_bf16_normal(in.x.get(), t * c.hidden, 1.0f, 120 + uint64_t(replay), s);
        Result r;
        r.y = g.replay(s);
        in.hx = in.x.download<uint16_t>(size_t(t * c.hidden));
        r.ids = in.ids;
        r.w = in.w;
        const Check ch = check_rows(L, in, r, all_rows(t), "mxfp4 stream-K graph replay");
        EXPECT_EQ(ch.nonfinite, 0);
        expect_accurate(ch);
      }
    }
  }
}

// Two K groups per 8-token decode tile (MOEKIT_MXFP4_K_GROUPS=3), alone and with stream-K pieces:
// H = 640 gives GEMM1 five K blocks (the first group runs three, the second two) and I = 384 GEMM2
// three; stream-K pieces of one K block leave the second group nothing to add. T = 7 and 64 run
// 16- and 32-token tiles, which keep one group.
TEST(MoeMxfp4, TwoKGroupsMatchTheReference) {
  moekit::test::Stream s;
  const MxWeights W(16, 640, 384, 29);
  const MoeConfig c = mx_config(small_config(16, 4, 640, 384, false));
  const Layer L(c, *W.fp8, W.slice(0), s);
  for (int sk : {0, 3}) {
    moekit::detail::Knobs k = moekit::detail::knobs();
    k.mxfp4_k_groups = 3;
    k.mxfp4_stream_k = sk;
    const moekit::detail::ScopedKnobs scope(k);
    for (int64_t t : {1, 2, 7, 64}) {
      SCOPED_TRACE(::testing::Message() << "stream-K mask " << sk << " T=" << t);
      Inputs in = make_x(t, c.hidden, 130 + uint64_t(t));
      random_ids(in, c, 140 + uint64_t(t), false);
      const Check ch = check_rows(L, in, run(L, in, false, s), all_rows(t), "mxfp4 two K groups");
      EXPECT_EQ(ch.nonfinite, 0);
      expect_accurate(ch);
    }
  }
  // CTAs that run several tiles (the exchange's two buffers in turn): 64 experts, k = 8, I = 2048
  // give GEMM1 ~16 active experts x 16 tiles at T = 2 for 132 CTAs, GEMM2 whole 128-row tiles.
  moekit::detail::Knobs k = moekit::detail::knobs();
  k.mxfp4_k_groups = 3;
  k.mxfp4_stream_k = 0;
  const moekit::detail::ScopedKnobs scope(k);
  const MxWeights W2(64, 512, 2048, 37);
  const MoeConfig c2 = mx_config(small_config(64, 8, 512, 2048, false));
  const Layer L2(c2, *W2.fp8, W2.slice(0), s);
  for (int64_t t : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "64 experts T=" << t);
    Inputs in = make_x(t, c2.hidden, 190 + uint64_t(t));
    random_ids(in, c2, 200 + uint64_t(t), false);
    const Check ch = check_rows(L2, in, run(L2, in, false, s), all_rows(t), "mxfp4 two K groups, tiles in turn");
    EXPECT_EQ(ch.nonfinite, 0);
    expect_accurate(ch);
  }
}

// GEMM1 in B-sharing pairs (each CTA of a cluster expands half of the B tile and copies it into its
// peer's stage): 8 experts, k = 2, T = 2560 put ~640 rows on an expert (the plan pairs from 512),
// with uneven counts (a 128-row block may end in a tile without valid rows, whose CTA still
// expands its half for the peer). Both modes against the reference; the deterministic layer bit for
// bit its FP8 form, whose GEMM1 pairs multicast B instead.
TEST(MoeMxfp4, BSharingPairsMatchTheReferenceAndTheFp8Form) {
  namespace d = moekit::detail;
  moekit::test::Stream s;
  const MxWeights W(8, 1024, 512, 77);
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    const MoeConfig c = mx_config(small_config(8, 2, 1024, 512, det));
    const Layer L(c, *W.fp8, W.slice(0), s);
    for (int64_t t : {2560, 2999}) {
      SCOPED_TRACE(::testing::Message() << "T=" << t);
      const d::MoePlan p = d::plan_moe_forward(L.cfg(), t, false, d::device_limits(), 0, d::knobs());
      ASSERT_EQ(p.gemm1.config.multicast, 2) << "the case must run the pairs";
      ASSERT_GT(p.gemm1.mx_stages, 0);
      Inputs in = make_x(t, c.hidden, 210 + uint64_t(t));
      random_ids(in, c, 220 + uint64_t(t), true);
      const Result r = run(L, in, false, s);
      const Check ch = check_rows(L, in, r, sample_rows(t, 96, 7), "mxfp4 B-sharing pairs");
      EXPECT_EQ(ch.nonfinite, 0);
      expect_accurate(ch);
      expect_dropped_rows_zero(L, in, r);
      if (det) expect_equals_fp8_layer(c, W, in, s, "B-sharing pairs");
    }
  }
}

// The decode GEMM1 reading token rows (MoeGemm1Input::kGathered: 8-token tiles, the tokens
// quantized in the sort's launch) computes what it computes from the permuted copy (the default),
// bit for bit in the deterministic layer; T = 5 puts 1.25 rows on an expert on average (T = 8, two,
// plans 16-token tiles, which read the permuted copy).
TEST(MoeMxfp4, GatheredTokensEqualThePermutedCopy) {
  moekit::test::Stream s;
  const MxWeights W(16, 640, 384, 31);
  MoeConfig c = mx_config(small_config(16, 4, 640, 384, true));
  c.gemm1_input = moekit::MoeGemm1Input::kGathered;
  const Layer gathered(c, *W.fp8, W.slice(0), s);
  c.gemm1_input = moekit::MoeGemm1Input::kAuto;
  const Layer permuted(c, *W.fp8, W.slice(0), s);
  for (int64_t t : {1, 2, 3, 5}) {
    SCOPED_TRACE(::testing::Message() << "T=" << t);
    Inputs in = make_x(t, c.hidden, 150 + uint64_t(t));
    random_ids(in, c, 160 + uint64_t(t), t == 5);  // (T = 5 with some -1 ids)
    namespace d = moekit::detail;
    ASSERT_TRUE(d::plan_moe_forward(gathered.cfg(), t, false, d::device_limits(), 0, d::knobs()).gather);
    ASSERT_FALSE(d::plan_moe_forward(permuted.cfg(), t, false, d::device_limits(), 0, d::knobs()).gather);
    const Result r = run(gathered, in, false, s);
    EXPECT_EQ(r.y, run(permuted, in, false, s).y);
    expect_accurate(check_rows(gathered, in, r, all_rows(t), "mxfp4 gathered tokens"));
  }
  // The layer outside the deterministic mode gathers with two K groups on GEMM1.
  MoeConfig fast = mx_config(small_config(16, 4, 640, 384, false));
  fast.gemm1_input = moekit::MoeGemm1Input::kGathered;
  const Layer gathered2(fast, *W.fp8, W.slice(0), s);
  for (int64_t t : {1, 3, 5}) {
    SCOPED_TRACE(::testing::Message() << "two K groups T=" << t);
    namespace d = moekit::detail;
    const d::MoePlan p = d::plan_moe_forward(gathered2.cfg(), t, false, d::device_limits(), 0, d::knobs());
    ASSERT_TRUE(p.gather);
    ASSERT_EQ(p.gemm1.k_groups, 2);
    Inputs in = make_x(t, fast.hidden, 170 + uint64_t(t));
    random_ids(in, fast, 180 + uint64_t(t), t == 5);
    expect_accurate(check_rows(gathered2, in, run(gathered2, in, false, s), all_rows(t), "mxfp4 gathered, 2 K groups"));
  }
}

// gpt-oss's W1 as stored (gate and up rows interleaved): the same layer as W1 in the SPEC order.
TEST(MoeMxfp4, GptOssInterleavedW1EqualsTheSpecOrder) {
  moekit::test::Stream s;
  const int64_t e = 8, h = 512, inter = 192;
  const MxWeights W(e, h, inter, 13);
  auto interleave = [&](const DeviceBuffer& b, int64_t row_bytes) {
    const auto spec = b.download<uint8_t>(b.bytes());
    std::vector<uint8_t> gpt(spec.size());
    for (int64_t x = 0; x < e; ++x)
      for (int64_t r = 0; r < 2 * inter; ++r)
        std::copy_n(spec.begin() + (x * 2 * inter + r) * row_bytes, row_bytes,
                    gpt.begin() + (x * 2 * inter + moekit::gpt_oss_w1_source_row(r, inter)) * row_bytes);
    return DeviceBuffer::from(gpt);
  };
  const DeviceBuffer c1 = interleave(W.c1, h / 2), s1 = interleave(W.s1, h / 32);
  moekit::MoeWeights g = W.slice(0);
  g.w1 = c1.get();
  g.w1_scales = s1.as<uint8_t>();
  g.w1_gate_up_interleaved = true;
  const MoeConfig c = mx_config(small_config(int(e), 2, h, inter, true));
  const Layer spec(c, *W.fp8, W.slice(0), s), gpt(c, *W.fp8, g, s);
  for (int64_t t : {1, 64, 500}) {
    Inputs in = make_x(t, h, 14 + uint64_t(t));
    random_ids(in, c, 15, false);
    EXPECT_EQ(run(gpt, in, false, s).y, run(spec, in, false, s).y) << "T=" << t;
  }
  moekit::MoeWeights f8 = W.fp8->slice(0);  // FP8 weights have no interleaved form
  f8.w1_gate_up_interleaved = true;
  MoeLayer fp8_layer(small_config(int(e), 2, h, inter, true));
  DeviceBuffer prepared(fp8_layer.prepared_weight_bytes());
  EXPECT_THROW(fp8_layer.prepare_weights(f8, prepared.get(), prepared.bytes(), s), moekit::Error);
}

// gpt-oss's layer (SPEC §6): clamp 7, h = g·sigmoid(1.702 g)·(u + 1), biases b1 before the clamp
// and b2 before the router weight, on MXFP4 experts of gpt-oss's shapes — against the float64
// reference of the same math, both GEMM2 paths; bf16 biases equal to the FP32 ones give the same y.
TEST(MoeMxfp4, GptOssLayerMatchesTheReference) {
  moekit::test::Stream s;
  const int64_t e = 16, h = 2880, inter = 2880;
  MxWeights W(e, h, inter, 17);
  std::mt19937 rng(18);
  std::normal_distribution<float> n(0.0f, 0.5f);
  auto bf16_values = [&](int64_t count, std::vector<float>& f, std::vector<uint16_t>& b) {
    f.resize(size_t(count));
    b.resize(size_t(count));
    for (int64_t i = 0; i < count; ++i) {
      b[size_t(i)] = moekit::bf16_from_float(n(rng));
      f[size_t(i)] = moekit::bf16_to_float(b[size_t(i)]);
    }
  };
  std::vector<uint16_t> b1_16, b2_16;
  bf16_values(e * 2 * inter, W.fp8->hb1, b1_16);
  bf16_values(e * h, W.fp8->hb2, b2_16);
  const DeviceBuffer b1 = DeviceBuffer::from(W.fp8->hb1), b2 = DeviceBuffer::from(W.fp8->hb2);
  const DeviceBuffer b1h = DeviceBuffer::from(b1_16), b2h = DeviceBuffer::from(b2_16);
  moekit::MoeWeights mw = W.slice(0), mw16 = W.slice(0);
  mw.b1 = b1.get();
  mw.b2 = b2.get();
  mw16.b1 = b1h.get();
  mw16.b2 = b2h.get();
  mw16.bias_bf16 = true;
  for (bool det : {false, true}) {
    SCOPED_TRACE(mode_name(det));
    MoeConfig c = mx_config(small_config(int(e), 4, h, inter, det));
    c.limit = 7.0f;
    c.activation = moekit::MoeActivation::kGptOss;
    const Layer L(c, *W.fp8, mw, s), L16(c, *W.fp8, mw16, s);
    for (int64_t t : {1, 64, 1000}) {
      SCOPED_TRACE(::testing::Message() << "T=" << t);
      Inputs in = make_x(t, h, 19 + uint64_t(t));
      random_ids(in, c, 20 + uint64_t(t), t == 64);
      const Result r = run(L, in, false, s);
      const Check ch = check_rows(L, in, r, sample_rows(t, kSampleRows, 21), "mxfp4 gpt-oss layer");
      EXPECT_EQ(ch.nonfinite, 0);
      expect_accurate(ch);
      if (det) EXPECT_EQ(run(L16, in, false, s).y, r.y) << "bf16 biases";
    }
  }
}

TEST(MoeMxfp4, ConfigurationAndWeightErrors) {
  MoeConfig c = mx_config(small_config(16, 4, 528, 256, false));  // H % 32 != 0
  EXPECT_THROW(MoeLayer::validate(c), moekit::Error);
  c.hidden = 512;
  c.inter = 288;  // I % 64 != 0
  EXPECT_THROW(MoeLayer::validate(c), moekit::Error);
  c.inter = 256;
  MoeLayer L(c);
  DeviceBuffer prepared(L.prepared_weight_bytes());
  moekit::MoeWeights w;  // FP8 fields only: the MXFP4 scales are missing
  const MxWeights W(16, 512, 256, 12);
  w.w1 = W.c1.get();
  w.w2 = W.c2.get();
  EXPECT_THROW(L.prepare_weights(w, prepared.get(), prepared.bytes(), nullptr), moekit::Error);
  w = W.slice(0);
  EXPECT_THROW(L.prepare_weights(w, prepared.get(), prepared.bytes() - 256, nullptr), moekit::Error);
  EXPECT_NO_THROW(L.prepare_weights(w, prepared.get(), prepared.bytes(), nullptr));
  c.activation = moekit::MoeActivation::kGptOss;
  c.activation_alpha = 0.0f;
  EXPECT_THROW(MoeLayer::validate(c), moekit::Error);
  c.activation_alpha = 1.702f;
  c.inter = 288;
  c.weight_format = MoeWeightFormat::kFp8;
  EXPECT_THROW(MoeLayer::validate(c), moekit::Error);  // the gpt-oss activation needs I % 64 == 0
}
