// End-to-end GPU test of the unfused MoE forward (sort → permute/quantize → GEMM1 → SwiGLU/requant
// → GEMM2 → combine) against the CPU float64 reference of SPEC §3 (moe_reference.h) on every token.
#include <gtest/gtest.h>

#include "gpu_test_util.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "moe/moe_reference.h"
#include "moe/moe_unfused.h"
#include "moekit/moekit.h"
#include "runtime/device_buffer.h"
#include "runtime/random.h"

using moekit::detail::DeviceBuffer;

namespace {

struct Layer {
  int e_total, k, local_offset, local_count;
  int64_t h, inter;
  float limit;
};

// End-to-end bound against the float64 reference. Measured on the H100: 0.5–0.9% relative L2.
// Inside each 128-wide K block the FP8 tensor-core accumulator keeps ~14 mantissa bits; that
// ~6e-5 relative error in g/u moves ~0.1% of h across an E4M3 rounding boundary in the
// requantization, each such code then being off by one step (~12%). A float64 reference cannot
// reproduce that, so the bound is 1.5e-2: layout, scale or routing bugs give O(1) errors.
// Each stage alone is held to its own tight bound in its own tests.
constexpr double kEndToEndBound = 1.5e-2;

// The reference is SPEC §3 (src/moe/moe_reference.h, shared with the layer's test and the bench)
// with the unfused path's one deviation modelled: GEMM1's output (g, u) is rounded to bf16 before
// SwiGLU. (Without that rounding the unfused result differs by ~1.5% relative L2: the bf16
// perturbation of h flips a few percent of the FP8 codes of the requantization by one step, ~12%
// each. The fused layer, which never rounds g/u to bf16, is checked without it.)
constexpr bool kRoundGuBf16 = true;

struct LayerRun {
  double rel_l2;
  int64_t nonfinite;
  std::vector<uint16_t> y;
};

LayerRun run_layer(const Layer& L, int64_t t, uint64_t seed, bool use_graph = false) {
  const int64_t h = L.h, I = L.inter, E = L.local_count;
  const int64_t kbh = moekit::ceil_div(h, 128), kbi = moekit::ceil_div(I, 128);
  const int64_t n_sw1 = E * moekit::ceil_div(2 * I, 128) * kbh, n_sw2 = E * kbh * kbi;
  DeviceBuffer x(size_t(std::max<int64_t>(t, 1) * h * 2)), ids(size_t(std::max<int64_t>(t * L.k, 1) * 4)),
      wts(size_t(std::max<int64_t>(t * L.k, 1) * 4)), w1(size_t(E * 2 * I * h)), w2(size_t(E * h * I)),
      sw1(size_t(n_sw1 * 4)), sw2(size_t(n_sw2 * 4)), y(size_t(std::max<int64_t>(t, 1) * h * 2)), invalid(4);
  moekit::detail::fill_random_bf16(x.get(), t * h, 1.0f, seed + 1, nullptr);
  moekit::detail::fill_random_e4m3(w1.get(), E * 2 * I * h, seed + 2, nullptr);
  moekit::detail::fill_random_e4m3(w2.get(), E * h * I, seed + 3, nullptr);
  moekit::detail::fill_random_f32(sw1.as<float>(), n_sw1, 0.5e-4f, 1e-4f, seed + 4, nullptr);
  moekit::detail::fill_random_f32(sw2.as<float>(), n_sw2, 0.5e-4f, 1e-4f, seed + 5, nullptr);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> hid(size_t(t * L.k));
  std::vector<float> hw8(size_t(t * L.k));
  for (size_t i = 0; i < hid.size(); ++i) {
    hid[i] = int32_t(rng() % uint64_t(L.e_total));
    if (rng() % 11 == 0) hid[i] = -1;                                  // no expert
    if (rng() % 13 == 0 && i % size_t(L.k)) hid[i] = hid[i - 1];      // duplicate
    if (rng() % 17 == 0) hid[i] = L.e_total + 3;                       // invalid: skipped, counted
    hw8[i] = float(rng() % 1000) / 1000.0f;
  }
  if (!hid.empty()) ids.upload(hid), wts.upload(hw8);
  y.fill_bytes(0xFF);

  moekit::detail::MoeUnfusedArgs a;
  a.num_tokens = t; a.top_k = L.k; a.hidden = h; a.inter = I; a.num_experts = L.e_total;
  a.local_offset = L.local_offset; a.local_count = L.local_count; a.limit = L.limit;
  a.x = x.get(); a.topk_ids = ids.as<int32_t>(); a.topk_weights = wts.as<float>();
  a.w1 = w1.get(); a.sw1 = sw1.as<float>(); a.w2 = w2.get(); a.sw2 = sw2.as<float>();
  a.y = y.get(); a.invalid_count = invalid.as<int32_t>();
  const size_t ws_bytes = moekit::detail::moe_unfused_workspace_size(t, L.k, h, I, L.local_count);
  DeviceBuffer ws(ws_bytes);
  if (!use_graph) {
    moekit::detail::moe_forward_unfused(a, ws.get(), ws_bytes, nullptr);
  } else {
    cudaStream_t s;
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    moekit::detail::moe_forward_unfused(a, ws.get(), ws_bytes, s);  // compile kernels outside capture
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s), cudaSuccess);
    moekit::test::run_in_graph(s, [&] { moekit::detail::moe_forward_unfused(a, ws.get(), ws_bytes, s); });
    cudaStreamDestroy(s);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  LayerRun r{};
  r.y = y.download<uint16_t>(size_t(t * h));
  const auto hw1 = w1.download<uint8_t>(size_t(E * 2 * I * h)), hw2 = w2.download<uint8_t>(size_t(E * h * I));
  const auto hsw1 = sw1.download<float>(size_t(n_sw1)), hsw2 = sw2.download<float>(size_t(n_sw2));
  const auto hx = x.download<uint16_t>(size_t(t * h));
  moekit::detail::MoeReferenceConfig rc;
  rc.num_experts = L.e_total;
  rc.top_k = L.k;
  rc.hidden = h;
  rc.inter = I;
  rc.limit = L.limit;
  rc.local_offset = L.local_offset;
  rc.local_count = L.local_count;
  rc.round_gu_bf16 = kRoundGuBf16;
  const std::vector<double> ref = moekit::detail::moe_reference(
      rc, hx.data(), hid.data(), hw8.data(), t,
      moekit::detail::moe_reference_fetch_all(rc, hw1.data(), hsw1.data(), hw2.data(), hsw2.data()));
  std::vector<float> got(size_t(t * h));
  for (size_t i = 0; i < got.size(); ++i) {
    got[i] = moekit::bf16_to_float(r.y[i]);
    r.nonfinite += !std::isfinite(got[i]);
  }
  r.rel_l2 = moekit::relative_l2_error(got.data(), ref.data(), got.size());
  int32_t inv = -1;
  EXPECT_EQ(cudaMemcpy(&inv, invalid.get(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int32_t want_inv = 0;
  for (int32_t id : hid) want_inv += (id < -1 || id >= L.e_total);
  EXPECT_EQ(inv, want_inv) << "invalid ids reported";
  return r;
}

}  // namespace

TEST(MoeUnfused, MatchesSpecReference) {
  // (E, k, slice, H, I, limit): a small DeepSeek-like layer, an EP half, a gpt-oss-like shape
  // (H = I = 2880, not multiples of 128, clamp 7), k = 1.
  const Layer layers[] = {{16, 4, 0, 16, 512, 256, 0.0f},
                          {16, 4, 8, 8, 512, 256, 0.0f},
                          {8, 4, 0, 8, 2880, 2880, 7.0f},
                          {32, 1, 0, 32, 1024, 512, 0.0f}};
  uint64_t seed = 10;
  for (const Layer& L : layers)
    for (int64_t t : {1, 2, 7, 64}) {
      SCOPED_TRACE(::testing::Message() << "E=" << L.e_total << " k=" << L.k << " slice=[" << L.local_offset << ","
                                        << L.local_offset + L.local_count << ") H=" << L.h << " I=" << L.inter
                                        << " T=" << t);
      const LayerRun r = run_layer(L, t, seed += 7);
      EXPECT_EQ(r.nonfinite, 0);
      EXPECT_LE(r.rel_l2, kEndToEndBound);
    }
}

TEST(MoeUnfused, ZeroTokens) {
  const Layer L{16, 4, 0, 16, 512, 256, 0.0f};
  const LayerRun r = run_layer(L, 0, 3);
  EXPECT_TRUE(r.y.empty());
}

TEST(MoeUnfused, GraphReplayMatchesEager) {
  const Layer L{16, 4, 0, 16, 512, 256, 0.0f};
  const LayerRun eager = run_layer(L, 7, 99, false);
  const LayerRun graph = run_layer(L, 7, 99, true);
  EXPECT_EQ(eager.y, graph.y);
  EXPECT_LE(graph.rel_l2, kEndToEndBound);
}
