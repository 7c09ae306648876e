// gpt-oss's MoE layer (SPEC §6) in the shared float64 reference: MXFP4 weights in gpt-oss's storage
// order, brought to moekit's (gate rows, then up rows) and to the FP8 block form, against a direct
// evaluation written the way gpt-oss's torch MLPBlock computes it (interleaved rows, exact MXFP4
// values, biases, its SwiGLU variant).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "moe/moe_reference.h"
#include "moe_test_util.h"
#include "moekit/mxfp4.h"
#include "moekit/numerics.h"

namespace {

struct Mxfp4Matrix {
  std::vector<uint8_t> codes, scales;
  int64_t rows = 0, k = 0;
};

Mxfp4Matrix checkpoint_like_mxfp4(int64_t rows, int64_t k, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> w(size_t(rows * k));
  for (float& v : w) v = moekit::bf16_to_float(moekit::bf16_from_float(nd(rng)));
  Mxfp4Matrix m;
  m.rows = rows;
  m.k = k;
  m.codes.resize(size_t(rows * k / 2));
  m.scales.resize(size_t(rows * k / 32));
  moekit::quantize_mxfp4(w.data(), rows, k, k, m.codes.data(), k / 2, m.scales.data(), k / 32);
  return m;
}

// x quantized 1x128 and dequantized, as the layer's GEMMs see it.
std::vector<double> fp8_activation(const std::vector<float>& x, int64_t k) {
  std::vector<uint8_t> q(x.size());
  std::vector<float> s(size_t(moekit::ceil_div(k, 128)));
  moekit::quantize_1x128(x.data(), 1, k, k, q.data(), k, s.data(), false);
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < k; ++i) out[size_t(i)] = double(moekit::e4m3_to_float(q[size_t(i)])) * double(s[size_t(i / 128)]);
  return out;
}

// The reference configured for gpt-oss's layer, all experts local.
moekit::detail::MoeReferenceConfig gpt_oss_config(int e, int k, int64_t h, int64_t inter, float limit, float alpha) {
  moekit::detail::MoeReferenceConfig c;
  c.num_experts = e;
  c.top_k = k;
  c.hidden = h;
  c.inter = inter;
  c.limit = limit;
  c.local_count = e;
  c.gpt_oss_activation = true;
  c.alpha = alpha;
  return c;
}

TEST(GptOssReference, MatchesADirectEvaluationOfTheMxfp4Layer) {
  const int E = 3, K = 2;
  const int64_t H = 256, I = 160, T = 4;  // I = 160: partial 128-blocks along N and K
  const float limit = 7.0f, alpha = 1.702f;
  std::mt19937 rng(21);
  // gpt-oss's storage: W1 [E, 2I, H] with rows interleaved (2i gate, 2i + 1 up), W2 [E, H, I].
  // Weights large enough that the clamps act.
  std::vector<Mxfp4Matrix> w1(E), w2(E);
  for (int e = 0; e < E; ++e) {
    w1[size_t(e)] = checkpoint_like_mxfp4(2 * I, H, 0.4f, rng);
    w2[size_t(e)] = checkpoint_like_mxfp4(H, I, 0.05f, rng);
  }
  std::normal_distribution<float> nb(0.0f, 0.5f);
  std::vector<float> b1_gptoss(size_t(E * 2 * I)), b2(size_t(E * H));
  for (float& v : b1_gptoss) v = nb(rng);
  for (float& v : b2) v = nb(rng);
  std::normal_distribution<float> nx(0.0f, 1.0f);
  std::vector<uint16_t> x(size_t(T * H));
  for (uint16_t& v : x) v = moekit::bf16_from_float(nx(rng));
  std::vector<int32_t> ids(size_t(T * K));
  std::vector<float> wts(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = int32_t(rng() % E);
    wts[i] = float(rng() % 1000) / 1000.0f;
  }

  // moekit's form: rows reordered, then the FP8 block form of each expert.
  const int64_t kbh = moekit::ceil_div(H, 128), kbi = moekit::ceil_div(I, 128);
  std::vector<uint8_t> q1(size_t(E * 2 * I * H)), q2(size_t(E * H * I));
  std::vector<float> s1(size_t(E * moekit::ceil_div(2 * I, 128) * kbh)), s2(size_t(E * kbh * kbi));
  std::vector<float> b1(b1_gptoss.size());
  int span = 0;
  for (int e = 0; e < E; ++e) {
    const Mxfp4Matrix& g = w1[size_t(e)];
    std::vector<uint8_t> codes(g.codes.size()), scales(g.scales.size());
    moekit::gpt_oss_w1_to_moekit_rows(g.codes.data(), I, H / 2, codes.data());
    moekit::gpt_oss_w1_to_moekit_rows(g.scales.data(), I, H / 32, scales.data());
    moekit::gpt_oss_w1_to_moekit_rows(b1_gptoss.data() + e * 2 * I, I, sizeof(float), b1.data() + e * 2 * I);
    moekit::mxfp4_to_fp8(codes.data(), H / 2, scales.data(), H / 32, 2 * I, H, q1.data() + e * 2 * I * H, H,
                         s1.data() + e * moekit::ceil_div(2 * I, 128) * kbh);
    moekit::mxfp4_to_fp8(w2[size_t(e)].codes.data(), I / 2, w2[size_t(e)].scales.data(), I / 32, H, I,
                         q2.data() + e * H * I, I, s2.data() + e * kbh * kbi);
    span = std::max({span, moekit::mxfp4_max_block_span(scales.data(), H / 32, 2 * I, H),
                     moekit::mxfp4_max_block_span(w2[size_t(e)].scales.data(), I / 32, H, I)});
  }
  ASSERT_LE(span, 15);  // checkpoint-like weights: the FP8 form is exact

  const moekit::detail::MoeReferenceConfig c = gpt_oss_config(E, K, H, I, limit, alpha);
  const std::vector<double> ref = moekit::detail::moe_reference(
      c, x.data(), ids.data(), wts.data(), T,
      moekit::detail::moe_reference_fetch_all(c, q1.data(), s1.data(), q2.data(), s2.data(), b1.data(), b2.data()));

  // Direct evaluation in gpt-oss's order and terms.
  std::vector<double> direct(size_t(T * H), 0.0);
  bool clamped = false;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> xt(static_cast<size_t>(H));
    for (int64_t i = 0; i < H; ++i) xt[size_t(i)] = moekit::bf16_to_float(x[size_t(t * H + i)]);
    const std::vector<double> a = fp8_activation(xt, H);
    for (int j = 0; j < K; ++j) {
      const int e = ids[size_t(t * K + j)];
      std::vector<double> w1e(size_t(2 * I * H)), w2e(size_t(H * I));
      moekit::dequantize_mxfp4(w1[size_t(e)].codes.data(), H / 2, w1[size_t(e)].scales.data(), H / 32, 2 * I, H,
                               w1e.data(), H);
      moekit::dequantize_mxfp4(w2[size_t(e)].codes.data(), I / 2, w2[size_t(e)].scales.data(), I / 32, H, I,
                               w2e.data(), I);
      std::vector<float> h(static_cast<size_t>(I));
      for (int64_t i = 0; i < I; ++i) {
        double glu = b1_gptoss[size_t(e * 2 * I + 2 * i)], lin = b1_gptoss[size_t(e * 2 * I + 2 * i + 1)];
        for (int64_t col = 0; col < H; ++col) {
          glu += w1e[size_t(2 * i * H + col)] * a[size_t(col)];        // x[..., ::2]
          lin += w1e[size_t((2 * i + 1) * H + col)] * a[size_t(col)];  // x[..., 1::2]
        }
        float g = float(glu), u = float(lin);
        clamped = clamped || g > limit || std::fabs(u) > limit;
        g = std::min(g, limit);
        u = std::max(std::min(u, limit), -limit);
        h[size_t(i)] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
      }
      const std::vector<double> hq = fp8_activation(h, I);
      for (int64_t col = 0; col < H; ++col) {
        double o = b2[size_t(e * H + col)];
        for (int64_t i = 0; i < I; ++i) o += w2e[size_t(col * I + i)] * hq[size_t(i)];
        direct[size_t(t * H + col)] += double(wts[size_t(t * K + j)]) * o;
      }
    }
  }
  EXPECT_TRUE(clamped);  // the data reaches the clamps
  EXPECT_LT(moekit::test::rel_l2(ref, direct), 1e-9);
}

// b2 enters before the router weight: y(b2) − y(0) = Σ_j w_j · b2[e_j] per token.
TEST(GptOssReference, SecondBiasIsWeightedByTheRouter) {
  const int E = 2, K = 2;
  const int64_t H = 128, I = 128, T = 3;
  std::mt19937 rng(8);
  std::vector<uint8_t> q1(size_t(E * 2 * I * H)), q2(size_t(E * H * I));
  for (uint8_t& b : q1) b = moekit::e4m3_from_float(std::normal_distribution<float>(0.0f, 1.0f)(rng));
  for (uint8_t& b : q2) b = moekit::e4m3_from_float(std::normal_distribution<float>(0.0f, 1.0f)(rng));
  std::vector<float> s1(size_t(E * 2), 0.01f), s2(size_t(E), 0.01f), b2(size_t(E * H));
  for (float& v : b2) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  std::vector<uint16_t> x(size_t(T * H));
  for (uint16_t& v : x) v = moekit::bf16_from_float(std::normal_distribution<float>(0.0f, 1.0f)(rng));
  const std::vector<int32_t> ids = {0, 1, 1, 1, 0, -1};
  const std::vector<float> w = {0.25f, 0.75f, 0.5f, 0.5f, 1.0f, 1.0f};
  const moekit::detail::MoeReferenceConfig c = gpt_oss_config(E, K, H, I, 7.0f, 1.702f);
  const auto without = moekit::detail::moe_reference(
      c, x.data(), ids.data(), w.data(), T,
      moekit::detail::moe_reference_fetch_all(c, q1.data(), s1.data(), q2.data(), s2.data()));
  const auto with = moekit::detail::moe_reference(
      c, x.data(), ids.data(), w.data(), T,
      moekit::detail::moe_reference_fetch_all(c, q1.data(), s1.data(), q2.data(), s2.data(), nullptr, b2.data()));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t col = 0; col < H; ++col) {
      double expect = 0.0;
      for (int j = 0; j < K; ++j) {
        const int e = ids[size_t(t * K + j)];
        if (e >= 0) expect += double(w[size_t(t * K + j)]) * double(b2[size_t(e * H + col)]);
      }
      const size_t i = size_t(t * H + col);
      EXPECT_NEAR(with[i] - without[i], expect, 1e-9 * (1.0 + std::fabs(without[i]))) << t << "," << col;
    }
}

}  // namespace
