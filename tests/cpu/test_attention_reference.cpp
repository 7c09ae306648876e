// The host references of DeepSeek-V4's attention (src/attention/attention_reference.h): the mixed
// FP8/BF16 KV entry format, RoPE on the last 64 dims, the float64 attention and the merge of
// per-source partials, checked through identities that must hold exactly (or to float64 rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention/attention_reference.h"
#include "moekit/numerics.h"

namespace {

using moekit::detail::AttentionRefOut;
using moekit::detail::AttentionSource;
using moekit::detail::MixedKvFormat;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> normal(size_t n, unsigned seed, double sd = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, sd);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

void expect_same(const AttentionRefOut& a, const AttentionRefOut& b, double tol) {
  ASSERT_EQ(a.o.size(), b.o.size());
  for (size_t i = 0; i < a.o.size(); ++i) ASSERT_NEAR(a.o[i], b.o[i], tol) << i;
  for (size_t h = 0; h < a.lse.size(); ++h) {
    if (std::isinf(b.lse[h])) EXPECT_EQ(a.lse[h], b.lse[h]) << h;
    else EXPECT_NEAR(a.lse[h], b.lse[h], tol) << h;
  }
}

// Shared fixture data: 4 heads of hd 512 over 40 entries.
struct Case {
  static constexpr int kHeads = 4, kDim = 512;
  static constexpr int64_t kEntries = 40;
  std::vector<double> q = normal(size_t(kHeads) * kDim, 1), kv = normal(size_t(kEntries) * kDim, 2);
  double scale = 1.0 / std::sqrt(double(kDim));
  AttentionRefOut run(const std::vector<AttentionSource>& src, const double* sink = nullptr, int32_t pos = 100) const {
    return moekit::detail::attention_reference(q.data(), kHeads, kDim, kv.data(), kEntries, src, pos, scale, sink);
  }
};

}  // namespace

TEST(MixedKv, GroupScalesAreTheSmallestPowersOfTwoThatFit) {
  EXPECT_EQ(moekit::detail::mixed_kv_group_scale(0.0f), 1.0f);
  EXPECT_EQ(moekit::detail::mixed_kv_group_scale(448.0f), 1.0f);
  EXPECT_EQ(moekit::detail::mixed_kv_group_scale(449.0f), 2.0f);
  EXPECT_EQ(moekit::detail::mixed_kv_group_scale(224.0f), 0.5f);
  EXPECT_TRUE(std::isnan(moekit::detail::mixed_kv_group_scale(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(moekit::detail::mixed_kv_group_scale(std::numeric_limits<float>::infinity()), 1.0f);
  std::mt19937 rng(3);
  for (int i = 0; i < 1000; ++i) {
    const float amax = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, int(rng() % 60) - 30);
    const float s = moekit::detail::mixed_kv_group_scale(amax);
    int e = 0;
    ASSERT_EQ(std::frexp(s, &e), 0.5f) << "a power of two";
    ASSERT_LE(amax / s, 448.0f);
    ASSERT_GT(amax / (s / 2), 448.0f) << "the smallest";
  }
}

TEST(MixedKv, EntriesRoundTripWithinE4m3AndBf16Rounding) {
  using F = MixedKvFormat;
  const int64_t n = 16;
  std::vector<float> k(size_t(n * F::kDim));
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int c = 0; c < F::kDim; ++c)  // groups of very different magnitudes
      k[size_t(r * F::kDim + c)] = d(rng) * std::ldexp(1.0f, int((r + c / F::kGroup) % 13) - 6);
  std::vector<uint8_t> nope(size_t(n * F::kNope));
  std::vector<float> scales(size_t(n * F::kScales)), back(k.size());
  std::vector<uint16_t> rope(size_t(n * F::kRope));
  moekit::detail::quantize_mixed_kv(k.data(), n, nope.data(), scales.data(), rope.data());
  moekit::detail::dequantize_mixed_kv(nope.data(), scales.data(), rope.data(), n, back.data());
  for (int64_t r = 0; r < n; ++r) {
    for (int c = 0; c < F::kDim; ++c) {
      const float x = k[size_t(r * F::kDim + c)], y = back[size_t(r * F::kDim + c)];
      if (c < F::kNope) {
        const float s = scales[size_t(r * F::kScales + c / F::kGroup)];
        // E4M3: half an ulp relative (2^-4) for normals, half the subnormal step (2^-10 s) below.
        ASSERT_LE(std::fabs(x - y), std::max(std::fabs(x) * 0.0625f, s * std::ldexp(1.0f, -10))) << r << " " << c;
        ASSERT_EQ(y, moekit::e4m3_to_float(moekit::e4m3_from_float(x / s)) * s);
      } else {
        ASSERT_EQ(y, moekit::bf16_to_float(moekit::bf16_from_float(x)));
      }
    }
  }
}

TEST(Rope, InverseUndoesForwardAndOnlyTheLast64DimsTurn) {
  const int64_t rows = 7, dim = 512, rope = 64;
  std::vector<float> cos(size_t(4096 * rope / 2)), sin(cos.size());
  for (int p = 0; p < 4096; ++p)
    for (int i = 0; i < rope / 2; ++i) {
      const double theta = p * std::pow(10000.0, -2.0 * i / rope);
      cos[size_t(p * rope / 2 + i)] = float(std::cos(theta));
      sin[size_t(p * rope / 2 + i)] = float(std::sin(theta));
    }
  const std::vector<int32_t> pos = {0, 1, 7, 300, 4095, -1, 4096};  // the last two: no position in the table
  const std::vector<double> x = normal(size_t(rows * dim), 9);
  std::vector<double> y = x;
  moekit::detail::rope_reference(y.data(), rows, dim, rope, pos.data(), cos.data(), sin.data(), 4096, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < dim - rope; ++c) ASSERT_EQ(y[size_t(r * dim + c)], x[size_t(r * dim + c)]);
    for (int64_t i = 0; i < rope / 2; ++i) {  // each pair keeps its length
      const size_t a = size_t(r * dim + dim - rope + 2 * i);
      ASSERT_NEAR(std::hypot(y[a], y[a + 1]), std::hypot(x[a], x[a + 1]), 1e-6);
    }
  }
  EXPECT_NE(y[size_t(3 * dim + dim - rope)], x[size_t(3 * dim + dim - rope)]) << "position 300 turns";
  for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(y[size_t(5 * dim + c)], x[size_t(5 * dim + c)]) << "negative position";
  for (int64_t c = 0; c < dim; ++c) EXPECT_EQ(y[size_t(6 * dim + c)], x[size_t(6 * dim + c)]) << "past the table";
  moekit::detail::rope_reference(y.data(), rows, dim, rope, pos.data(), cos.data(), sin.data(), 4096, true);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-6) << i;  // cos² + sin² = 1 to float rounding
}

TEST(AttentionReference, OneEntryAndTheSink) {
  const Case c;
  const std::vector<double> sink = {-1.0, 0.0, 0.5, 3.0};
  const AttentionRefOut a = c.run({{{7}, {}}}, sink.data());
  for (int h = 0; h < Case::kHeads; ++h) {
    double s = 0.0;
    for (int d = 0; d < Case::kDim; ++d) s += c.q[size_t(h * Case::kDim + d)] * c.kv[size_t(7 * Case::kDim + d)];
    s *= c.scale;
    EXPECT_NEAR(a.lse[size_t(h)], s, 1e-12);
    const double p = std::exp(s) / (std::exp(s) + std::exp(sink[size_t(h)]));
    for (int d = 0; d < Case::kDim; ++d)
      ASSERT_NEAR(a.o[size_t(h * Case::kDim + d)], p * c.kv[size_t(7 * Case::kDim + d)], 1e-12);
  }
}

TEST(AttentionReference, SinkScalesTheOutputAndLeavesTheLse) {
  const Case c;
  const std::vector<double> sink = {-2.0, 0.0, 1.0, 4.0};
  const std::vector<AttentionSource> src = {{{1, 5, 9, 12, 33}, {}}};
  const AttentionRefOut a = c.run(src), b = c.run(src, sink.data());
  for (int h = 0; h < Case::kHeads; ++h) {
    EXPECT_DOUBLE_EQ(a.lse[size_t(h)], b.lse[size_t(h)]);
    const double f = 1.0 / (1.0 + std::exp(sink[size_t(h)] - a.lse[size_t(h)]));
    for (int d = 0; d < Case::kDim; ++d)
      ASSERT_NEAR(b.o[size_t(h * Case::kDim + d)], f * a.o[size_t(h * Case::kDim + d)], 1e-12);
  }
}

TEST(AttentionReference, MinusOneEntriesCausalMaskingAndEmptyQueries) {
  const Case c;
  expect_same(c.run({{{3, -1, 8, -1, 20}, {}}}), c.run({{{3, 8, 20}, {}}}), 0.0);
  // Causal window: entries after the query's position (100) are masked.
  expect_same(c.run({{{3, 8, 20, 21}, {90, 100, 101, 150}}}), c.run({{{3, 8}, {}}}), 0.0);
  const std::vector<double> sink = {0.0, 1.0, 2.0, 3.0};
  for (const std::vector<AttentionSource>& empty :
       {std::vector<AttentionSource>{}, std::vector<AttentionSource>{{{-1, -1}, {}}},
        std::vector<AttentionSource>{{{4}, {101}}, {{}, {}}}}) {
    const AttentionRefOut a = c.run(empty, sink.data());
    for (double v : a.o) ASSERT_EQ(v, 0.0);
    for (double l : a.lse) ASSERT_EQ(l, -kInf);
  }
}

// Partials per source merged = one softmax over both sources (the sink applied once, at the
// merge); a source weighted by ln 2 = that source's entries counted twice; empty partials weigh
// nothing.
TEST(AttentionReference, MergedPartialsEqualOneSoftmaxOverAllSources) {
  const Case c;
  const AttentionSource topk{{0, 4, 9, 17, 25, 31, -1}, {}};
  const AttentionSource window{{36, 37, 38, 39}, {97, 98, 99, 101}};
  const std::vector<double> sink = {-1.0, 0.5, 2.0, 0.0};
  auto partial = [&](const AttentionSource& s) {
    return moekit::detail::attention_partial_reference(c.q.data(), Case::kHeads, Case::kDim, c.kv.data(),
                                                       Case::kEntries, s, 100, c.scale);
  };
  const std::vector<AttentionRefOut> parts = {partial(topk), partial(window)};
  expect_same(moekit::detail::merge_partials_reference(parts, {}, Case::kHeads, Case::kDim, sink.data()),
              c.run({topk, window}, sink.data()), 1e-12);
  const std::vector<double> ln2(Case::kHeads, std::log(2.0));
  AttentionSource twice = window;
  twice.entries.insert(twice.entries.end(), window.entries.begin(), window.entries.end());
  twice.positions.insert(twice.positions.end(), window.positions.begin(), window.positions.end());
  expect_same(moekit::detail::merge_partials_reference(parts, {nullptr, ln2.data()}, Case::kHeads, Case::kDim,
                                                       nullptr),
              c.run({topk, twice}), 1e-12);
  const AttentionRefOut none = partial({{-1}, {}});
  expect_same(moekit::detail::merge_partials_reference({parts[0], none}, {}, Case::kHeads, Case::kDim, nullptr),
              parts[0], 1e-12);
  // An empty source stays out whatever its weight (+inf included).
  const std::vector<double> inf_weight(Case::kHeads, kInf);
  expect_same(moekit::detail::merge_partials_reference({parts[0], none}, {nullptr, inf_weight.data()}, Case::kHeads,
                                                       Case::kDim, nullptr),
              parts[0], 1e-12);
  const AttentionRefOut all_empty =
      moekit::detail::merge_partials_reference({none, none}, {}, Case::kHeads, Case::kDim, sink.data());
  for (double v : all_empty.o) ASSERT_EQ(v, 0.0);
  for (double l : all_empty.lse) ASSERT_EQ(l, -kInf);
}
