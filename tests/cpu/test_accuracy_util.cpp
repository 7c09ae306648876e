// The accuracy metrics and the checkpoint-like data generators the GPU accuracy tests rely on
// (tests/moe_accuracy_util.h): a metric that cannot fail, or data that is not what it claims, would
// make those tests vacuous.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "moe_accuracy_util.h"
#include "moekit/numerics.h"

namespace mt = moekit::test;

TEST(AccuracyUtil, RowErrorsMedianMaxAndNaN) {
  // Four rows of two columns: row errors 0, 0.1, 0.2 and (NaN) inf.
  const std::vector<double> ref = {1, 0, 0, 1, 3, 4, 1, 1};
  const std::vector<float> y = {1, 0, 0, 1.1f, 3.6f, 4.8f, NAN, 1};
  const mt::RowErrors e = mt::row_errors(y, ref, 4, 2);
  EXPECT_NEAR(e.rows[1], 0.1, 1e-6);
  EXPECT_NEAR(e.rows[2], 0.2, 1e-6);
  EXPECT_TRUE(std::isinf(e.rows[3]));
  EXPECT_TRUE(std::isinf(e.row_max));
  EXPECT_EQ(e.worst_row, 3);
  EXPECT_NEAR(e.row_median, 0.2, 1e-6);  // upper median of {0, 0.1, 0.2, inf}
  EXPECT_TRUE(std::isinf(e.overall)) << "a NaN must fail every bound";
}

TEST(AccuracyUtil, CheckpointWeightsAreQuantizedNormals) {
  const mt::QuantizedWeights w = mt::checkpoint_weights(2, 256, 384, 0.02, 7);
  ASSERT_EQ(w.q.size(), size_t(2 * 256 * 384));
  ASSERT_EQ(w.s.size(), size_t(2 * 2 * 3));
  // Each 128x128 block's amax maps to ±448 (the quantizer's scale is amax / 448), and the scale is
  // that of N(0, 0.02²) over 16384 values: amax ≈ 4 σ.
  for (size_t b = 0; b < w.s.size(); ++b) {
    EXPECT_GT(w.s[b] * 448.0f, 3.0f * 0.02f);
    EXPECT_LT(w.s[b] * 448.0f, 5.5f * 0.02f);
  }
  int max_codes = 0;
  for (uint8_t c : w.q) max_codes += (c & 0x7F) == 0x7E;  // |code| = 448
  EXPECT_GE(max_codes, 12) << "every block holds its amax at ±448";
  // Dequantized, the weights are the bf16 values they came from, to E4M3 precision (2^-4 relative).
  double num = 0, den = 0;
  for (size_t i = 0; i < 256 * 384; ++i) {
    const size_t blk = (i / 384) / 128 * 3 + (i % 384) / 128;
    const double v = moekit::bf16_to_float(w.bf16[i]), d = moekit::e4m3_to_float(w.q[i]) * w.s[blk];
    num += (v - d) * (v - d);
    den += v * v;
  }
  EXPECT_LT(std::sqrt(num / den), 0.04);
  EXPECT_GT(std::sqrt(num / den), 0.005);
}

TEST(AccuracyUtil, DistinctTopkIds) {
  std::vector<int32_t> ids;
  std::vector<float> w;
  mt::distinct_topk(500, 6, 64, 3, &ids, &w);
  for (int t = 0; t < 500; ++t) {
    const std::set<int32_t> s(ids.begin() + t * 6, ids.begin() + t * 6 + 6);
    EXPECT_EQ(s.size(), 6u);
    for (int32_t id : s) EXPECT_TRUE(id >= 0 && id < 64);
  }
  for (float v : w) EXPECT_TRUE(v >= 0.1f && v < 1.1f);
}

TEST(AccuracyUtil, OneRoundingStep) {
  const uint8_t one = moekit::e4m3_from_float(1.0f), next = moekit::e4m3_from_float(1.125f);
  EXPECT_TRUE(mt::one_rounding_step(one, next));
  EXPECT_TRUE(mt::one_rounding_step(moekit::e4m3_from_float(64.0f), moekit::e4m3_from_float(72.0f)));
  EXPECT_FALSE(mt::one_rounding_step(moekit::e4m3_from_float(64.0f), moekit::e4m3_from_float(80.0f)));
  EXPECT_TRUE(mt::one_rounding_step(moekit::e4m3_from_float(448.0f), moekit::e4m3_from_float(416.0f)));
  EXPECT_FALSE(mt::one_rounding_step(moekit::e4m3_from_float(448.0f), moekit::e4m3_from_float(384.0f)));
  // Near zero a tiny perturbation may cross zero and several subnormal steps.
  EXPECT_TRUE(mt::one_rounding_step(moekit::e4m3_from_float(-0.01f), moekit::e4m3_from_float(0.01f)));
  EXPECT_FALSE(mt::one_rounding_step(moekit::e4m3_from_float(-0.5f), moekit::e4m3_from_float(0.5f)));
}

TEST(AccuracyUtil, UnquantizedLayerMatchesAHandComputation) {
  // H = 2, I = 1, one expert, one token, k = 1: y = w · W2 · silu(g) u with (g, u) = W1 x.
  const std::vector<uint16_t> x = {moekit::bf16_from_float(1.0f), moekit::bf16_from_float(2.0f)};
  const std::vector<uint16_t> w1 = {moekit::bf16_from_float(0.5f), moekit::bf16_from_float(0.25f),
                                    moekit::bf16_from_float(1.0f), moekit::bf16_from_float(-1.0f)};
  const std::vector<uint16_t> w2 = {moekit::bf16_from_float(2.0f), moekit::bf16_from_float(-3.0f)};
  const std::vector<double> y = mt::unquantized_layer(x, 1, 2, 1, 1, 1, {0}, {0.5f}, w1, w2);
  const double g = 1.0, u = -1.0, h = g / (1.0 + std::exp(-g)) * u;
  EXPECT_NEAR(y[0], 0.5 * 2.0 * h, 1e-12);
  EXPECT_NEAR(y[1], 0.5 * -3.0 * h, 1e-12);
}
