// CPU tests of the host quantizers (include/moekit/numerics.h, SPEC §2): quantization scales,
// the 1x128 and 128x128 quantizers and the activation-scale layouts.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "moekit/error.h"
#include "moekit/numerics.h"

#include "numerics_test_util.h"

namespace moekit {
namespace {

using namespace numerics_test;

// ============================================================================================
// Quantization scales
// ============================================================================================

TEST(QuantScale, KnownValues) {
  EXPECT_EQ(quant_scale(448.0f, false), 1.0f);
  EXPECT_EQ(quant_scale(896.0f, false), 2.0f);
  EXPECT_EQ(quant_scale(224.0f, false), 0.5f);
  EXPECT_EQ(quant_scale(1.0f, false), 1.0f / 448.0f);
  EXPECT_EQ(quant_scale(3.5f, false), 3.5f / 448.0f);
  EXPECT_EQ(quant_scale(1000.0f, false), 1000.0f / 448.0f);
  // The division is the correctly rounded float division (not a multiplication by 1/448).
  for (float a : {0.1f, 0.3f, 1.7f, 7.0f, 12345.678f, 3e30f}) {
    EXPECT_EQ(quant_scale(a, false), static_cast<float>(static_cast<double>(a) / 448.0)) << a;
  }
}

TEST(QuantScale, FloorIs1e4) {
  const float floor_scale = 1e-4f / 448.0f;
  EXPECT_EQ(quant_scale(0.0f, false), floor_scale);
  EXPECT_EQ(quant_scale(-0.0f, false), floor_scale);
  EXPECT_EQ(quant_scale(1e-5f, false), floor_scale);
  EXPECT_EQ(quant_scale(1e-4f, false), floor_scale);
  EXPECT_EQ(quant_scale(std::numeric_limits<float>::denorm_min(), false), floor_scale);
  EXPECT_GT(quant_scale(std::nextafter(1e-4f, 1.0f), false), floor_scale);
  EXPECT_NEAR(floor_scale, 2.232142857e-7f, 1e-15f);
}

TEST(QuantScale, Ue8m0RoundsUpToPowersOfTwo) {
  EXPECT_EQ(quant_scale(448.0f, true), 1.0f);               // exact power stays
  EXPECT_EQ(quant_scale(std::nextafter(448.0f, 0.0f), true), 1.0f);
  EXPECT_EQ(quant_scale(449.0f, true), 2.0f);
  EXPECT_EQ(quant_scale(std::nextafter(448.0f, kInf), true), 2.0f);
  EXPECT_EQ(quant_scale(896.0f, true), 2.0f);
  EXPECT_EQ(quant_scale(1.0f, true), 0x1p-8f);  // 1/448 = 0.00223 in (2^-9, 2^-8]
  EXPECT_EQ(quant_scale(7.0f, true), 0x1p-6f);  // 7/448 = 2^-6 exactly
  EXPECT_EQ(quant_scale(7.001f, true), 0x1p-5f);
  EXPECT_EQ(quant_scale(0.0f, true), 0x1p-22f);  // floor 2.23e-7 in (2^-23, 2^-22]
  for (int e = -10; e <= 20; ++e) {
    const float amax = std::ldexp(448.0f, e);
    EXPECT_EQ(quant_scale(amax, true), std::ldexp(1.0f, e)) << e;
    EXPECT_EQ(quant_scale(std::nextafter(amax, kInf), true), std::ldexp(1.0f, e + 1)) << e;
  }
}

TEST(QuantScale, Ue8m0RandomProperties) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> log_amax(-30.0f, 40.0f);
  for (int it = 0; it < 100000; ++it) {
    const float amax = std::exp2(log_amax(rng));
    const float s = quant_scale(amax, false);
    const float p = quant_scale(amax, true);
    ASSERT_EQ(s, scale_reference(amax, false)) << amax;
    ASSERT_EQ(p, scale_reference(amax, true)) << amax;
    ASSERT_TRUE(is_power_of_two(p)) << amax;
    ASSERT_GE(p, s);
    ASSERT_LT(p, 2.0f * s);
    // With a power-of-two scale the block maximum never exceeds 448 after division.
    ASSERT_LE(std::max(amax, 1e-4f) / p, 448.0f);
  }
}

TEST(QuantScale, NonFiniteAmax) {
  EXPECT_EQ(quant_scale(kInf, false), kInf);
  EXPECT_EQ(quant_scale(kInf, true), kInf);
  // Decision: NaN amax is ignored like fmaxf does, giving the floor scale (also for a
  // signalling NaN).
  EXPECT_EQ(quant_scale(kNaN, false), 1e-4f / 448.0f);
  EXPECT_EQ(quant_scale(kNaN, true), 0x1p-22f);
  EXPECT_EQ(quant_scale(float_of(0x7F800001u), false), 1e-4f / 448.0f);
  EXPECT_EQ(quant_scale(float_of(0xFFC00000u), true), 0x1p-22f);
  // Largest finite amax: FLT_MAX / 448 is finite and its power-of-two round-up too.
  EXPECT_TRUE(std::isfinite(quant_scale(std::numeric_limits<float>::max(), true)));
  EXPECT_EQ(quant_scale(std::numeric_limits<float>::max(), true), 0x1p120f);  // 2^119.19 → 2^120
}

// ============================================================================================
// Quantizers
// ============================================================================================

// Checks one quantized element against the definition: q is the brute-force nearest E4M3 code of
// the float quotient x / s, and |x − q·s| is at most half an E4M3 spacing at |x / s| (plus the
// quotient's own rounding).
::testing::AssertionResult quantized_ok(float x, uint8_t q, float s) {
  const float y = x / s;
  const uint8_t want = e4m3_brute_force(y);
  if (q != want)
    return ::testing::AssertionFailure() << "x=" << x << " s=" << s << " code " << int(q) << ", want " << int(want);
  if (std::isnan(x)) return ::testing::AssertionSuccess();
  const double err = std::fabs(static_cast<double>(x) - e4m3_value(q) * s);
  const double bound = (0.5 * e4m3_spacing(y) + 0x1p-23 * std::fabs(y)) * s;
  if (!(err <= bound))
    return ::testing::AssertionFailure() << "x=" << x << " s=" << s << " |x - q*s| = " << err << " > " << bound;
  return ::testing::AssertionSuccess();
}

TEST(Quantize1x128, ScalesOfFullAndPartialBlocks) {
  // K = 2880 = 22.5 x 128: 23 blocks, the last one has 64 valid elements.
  const int64_t m = 3, k = 2880, ldx = k + 40, ldq = k + 16;
  const int64_t nkb = ceil_div(k, kQuantBlock);
  ASSERT_EQ(nkb, 23);
  std::vector<float> x(m * ldx, 1e30f);  // poison in the padding columns
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> peak(m * nkb);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < k; ++c) x[i * ldx + c] = u(rng);
    for (int64_t kb = 0; kb < nkb; ++kb) {
      // A known peak per block, at a position depending on the block, alternating signs.
      const float p = 1.5f + 0.25f * static_cast<float>(kb) + 10.0f * static_cast<float>(i);
      const int64_t valid = std::min<int64_t>(kQuantBlock, k - kb * kQuantBlock);
      const int64_t pos = kb * kQuantBlock + (kb * 37 + i * 11) % valid;
      x[i * ldx + pos] = (kb % 2) ? -p : p;
      peak[i * nkb + kb] = p;
    }
  }
  std::vector<uint8_t> q(m * ldq, 0x55);
  std::vector<float> scales(m * nkb + 4, -1.0f);
  for (bool ue8m0 : {false, true}) {
    std::fill(q.begin(), q.end(), 0x55);
    std::fill(scales.begin(), scales.end(), -1.0f);
    quantize_1x128(x.data(), m, k, ldx, q.data(), ldq, scales.data(), ue8m0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t kb = 0; kb < nkb; ++kb) {
        const float s = scales[i * nkb + kb];
        EXPECT_EQ(s, scale_reference(peak[i * nkb + kb], ue8m0)) << "row " << i << " block " << kb;
        if (!ue8m0) {
          EXPECT_EQ(s, peak[i * nkb + kb] / 448.0f);
        }
      }
      for (int64_t c = 0; c < k; ++c) {
        ASSERT_TRUE(quantized_ok(x[i * ldx + c], q[i * ldq + c], scales[i * nkb + c / kQuantBlock])) << "1x128 [" << i << ", " << c << "]";
      }
      for (int64_t c = k; c < ldq; ++c) EXPECT_EQ(q[i * ldq + c], 0x55) << "padding written at " << c;
    }
    for (int64_t t = m * nkb; t < m * nkb + 4; ++t) EXPECT_EQ(scales[t], -1.0f) << "scale overrun";
  }
}

TEST(Quantize1x128, PartialLastBlockUsesOnlyItsValidElements) {
  // k = 200: block 0 has 128 elements, block 1 has 72. Elements past k (stride padding) are
  // huge and must not be read into any amax.
  const int64_t m = 2, k = 200, ldx = 256, ldq = 208;
  std::vector<float> x(m * ldx, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < k; ++c) x[i * ldx + c] = (c < 128) ? 100.0f : 2.0f * static_cast<float>(i + 1);
    for (int64_t c = k; c < ldx; ++c) x[i * ldx + c] = 1e6f;
  }
  std::vector<uint8_t> q(m * ldq);
  std::vector<float> s(m * 2);
  quantize_1x128(x.data(), m, k, ldx, q.data(), ldq, s.data(), false);
  EXPECT_EQ(s[0], 100.0f / 448.0f);
  EXPECT_EQ(s[1], 2.0f / 448.0f);
  EXPECT_EQ(s[2], 100.0f / 448.0f);
  EXPECT_EQ(s[3], 4.0f / 448.0f);
  // Every element equals its block's amax, so every code is 448.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) EXPECT_EQ(q[i * ldq + c], 0x7E);
  // A single-element last block (k = 129).
  std::vector<float> y(129, 1.0f);
  y[128] = -0.5f;
  std::vector<uint8_t> qy(129);
  float sy[2];
  quantize_1x128(y.data(), 1, 129, 129, qy.data(), 129, sy, true);
  EXPECT_EQ(sy[0], 0x1p-8f);  // 1/448 rounded up
  EXPECT_EQ(sy[1], 0x1p-9f);  // 0.5/448 rounded up
  EXPECT_EQ(qy[128], e4m3_from_float(-0.5f / 0x1p-9f));  // -256
  EXPECT_EQ(e4m3_to_float(qy[128]), -256.0f);
}

TEST(Quantize1x128, DequantizationErrorIsWithinHalfAnUlp) {
  const int64_t m = 16, k = 1000;
  std::vector<float> x = random_normal(m * k, 42);
  // Spread the magnitudes over rows and blocks, with outliers and tiny values.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) {
      float& v = x[i * k + c];
      v *= std::ldexp(1.0f, static_cast<int>(i) - 8);
      if (c % 97 == 0) v *= 50.0f;
      if (c % 89 == 0) v *= 1e-6f;
    }
  const int64_t nkb = ceil_div(k, kQuantBlock);
  for (bool ue8m0 : {false, true}) {
    std::vector<uint8_t> q(m * k);
    std::vector<float> s(m * nkb);
    quantize_1x128(x.data(), m, k, k, q.data(), k, s.data(), ue8m0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t kb = 0; kb < nkb; ++kb) {
        float amax = 0.0f;
        for (int64_t c = kb * kQuantBlock; c < std::min(k, (kb + 1) * kQuantBlock); ++c)
          amax = std::max(amax, std::fabs(x[i * k + c]));
        ASSERT_EQ(s[i * nkb + kb], scale_reference(amax, ue8m0));
        if (ue8m0) {
          ASSERT_TRUE(is_power_of_two(s[i * nkb + kb]));
        }
      }
      for (int64_t c = 0; c < k; ++c) ASSERT_TRUE(quantized_ok(x[i * k + c], q[i * k + c], s[i * nkb + c / kQuantBlock])) << "1x128 [" << i << ", " << c << "]";
    }
    // The block maximum lands on ±448 without ue8m0, and in [224, 448] with it (the maximum
    // divided by the power-of-two scale is in (224, 448], and may round down to 224).
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t kb = 0; kb < nkb; ++kb) {
        float qmax = 0.0f;
        for (int64_t c = kb * kQuantBlock; c < std::min(k, (kb + 1) * kQuantBlock); ++c)
          qmax = std::max(qmax, std::fabs(e4m3_to_float(q[i * k + c])));
        if (ue8m0) {
          EXPECT_GE(qmax, 224.0f);
          EXPECT_LE(qmax, 448.0f);
        } else {
          EXPECT_EQ(qmax, 448.0f);
        }
      }
    }
  }
}

TEST(Quantize1x128, RepresentableValuesAreExact) {
  // With amax = 448 (s = 1), every E4M3 value quantizes to itself.
  std::vector<float> x;
  for (int c = 0; c < 256; ++c)
    if (!is_e4m3_nan(static_cast<uint8_t>(c))) x.push_back(e4m3_to_float(static_cast<uint8_t>(c)));
  ASSERT_EQ(x.size(), 254u);
  const int64_t k = static_cast<int64_t>(x.size());  // two blocks, both contain ±448
  ASSERT_EQ(x[126], 448.0f);   // in block 0
  ASSERT_EQ(x[253], -448.0f);  // in block 1
  std::vector<uint8_t> q(k);
  float s[2];
  quantize_1x128(x.data(), 1, k, k, q.data(), k, s, true);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 1.0f);
  for (int64_t c = 0; c < k; ++c) EXPECT_EQ(bits_of(e4m3_to_float(q[c])), bits_of(x[c])) << c;
}

// Elements x with |x| < amax for which the IEEE quotient x / s and the reciprocal product
// x * (1 / s) round to different E4M3 codes (s = quant_scale(amax, false)): they tell a
// quantizer that divides from one that multiplies by the reciprocal. Searched a few float ulps
// around every midpoint between two codes, scaled by s.
std::vector<float> division_sensitive_values(float amax) {
  const float s = quant_scale(amax, false);
  const float inv = 1.0f / s;
  std::vector<float> found;
  for (int c = 0; c < 0x7D; ++c) {
    const float mid = (e4m3_to_float(static_cast<uint8_t>(c)) + e4m3_to_float(static_cast<uint8_t>(c + 1))) * 0.5f;
    const uint32_t center = bits_of(mid * s);
    for (int d = -8; d <= 8; ++d) {
      const float x = float_of(center + static_cast<uint32_t>(d));
      if (!(x < amax)) continue;
      if (e4m3_brute_force(x / s) != e4m3_brute_force(x * inv)) found.push_back(x);
    }
  }
  return found;
}

TEST(Quantize1x128, DividesByTheScaleRatherThanMultiplyingByItsInverse) {
  for (float amax : {3.0f, 0.7f, 11.0f, 0.3f}) {
    const std::vector<float> sensitive = division_sensitive_values(amax);
    ASSERT_GE(sensitive.size(), 4u) << "amax " << amax;
    // One block per 127 values, each block led by amax so every block has the same scale.
    const int64_t per_block = kQuantBlock - 1;
    const int64_t nkb = ceil_div(static_cast<int64_t>(sensitive.size()), per_block);
    const int64_t k = nkb * kQuantBlock;
    std::vector<float> x(k, 0.0f);
    for (size_t t = 0; t < sensitive.size(); ++t)
      x[(t / per_block) * kQuantBlock + 1 + t % per_block] = (t % 2) ? -sensitive[t] : sensitive[t];
    for (int64_t kb = 0; kb < nkb; ++kb) x[kb * kQuantBlock] = amax;
    std::vector<uint8_t> q(k);
    std::vector<float> sc(nkb);
    quantize_1x128(x.data(), 1, k, k, q.data(), k, sc.data(), false);
    for (int64_t kb = 0; kb < nkb; ++kb) ASSERT_EQ(sc[kb], amax / 448.0f);
    for (int64_t c = 0; c < k; ++c) ASSERT_EQ(q[c], e4m3_brute_force(x[c] / sc[0])) << "amax " << amax << " x " << x[c];
  }
}

TEST(Quantize1x128, ZeroAndTinyBlocksUseTheFloor) {
  const int64_t k = 256;
  std::vector<float> x(k, 0.0f);
  for (int64_t c = 128; c < k; ++c) x[c] = (c % 2 ? 1e-6f : -3e-5f);
  std::vector<uint8_t> q(k, 0x55);
  float s[2];
  quantize_1x128(x.data(), 1, k, k, q.data(), k, s, false);
  EXPECT_EQ(s[0], 1e-4f / 448.0f);
  EXPECT_EQ(s[1], 1e-4f / 448.0f);
  for (int64_t c = 0; c < 128; ++c) EXPECT_EQ(q[c], 0x00);
  for (int64_t c = 128; c < k; ++c) ASSERT_TRUE(quantized_ok(x[c], q[c], s[1])) << "column " << c;
  EXPECT_EQ(e4m3_to_float(q[128]), -128.0f);  // -3e-5 / 2.232e-7 = -134.4 → -128
  EXPECT_EQ(e4m3_to_float(q[129]), 4.5f);     // 1e-6 / 2.232e-7 = 4.48 → 4.5
}

TEST(Quantize1x128, NaNElementsAreIgnoredByTheScaleAndStayNaN) {
  const int64_t k = 128;
  std::vector<float> x(k);
  for (int64_t c = 0; c < k; ++c) x[c] = static_cast<float>(c % 7) - 3.0f;  // amax 3
  x[5] = kNaN;
  x[6] = -kNaN;
  x[7] = float_of(0x7F800001u);  // signalling NaN
  std::vector<uint8_t> q(k);
  float s = 0.0f;
  quantize_1x128(x.data(), 1, k, k, q.data(), k, &s, false);
  EXPECT_EQ(s, 3.0f / 448.0f);
  EXPECT_EQ(q[5], 0x7F);
  EXPECT_EQ(q[6], 0x7F);
  EXPECT_EQ(q[7], 0x7F);
  for (int64_t c = 8; c < k; ++c) ASSERT_TRUE(quantized_ok(x[c], q[c], s)) << "column " << c;
  // A block of only NaNs gets the floor scale.
  std::vector<float> all_nan(k, kNaN);
  quantize_1x128(all_nan.data(), 1, k, k, q.data(), k, &s, false);
  EXPECT_EQ(s, 1e-4f / 448.0f);
  for (int64_t c = 0; c < k; ++c) EXPECT_EQ(q[c], 0x7F);
}

TEST(Quantize1x128, InfElementMakesTheBlockScaleInf) {
  const int64_t k = 256;
  std::vector<float> x(k, 1.0f);
  x[3] = kInf;
  x[4] = -2.0f;
  std::vector<uint8_t> q(k);
  float s[2];
  quantize_1x128(x.data(), 1, k, k, q.data(), k, s, false);
  EXPECT_EQ(s[0], kInf);
  EXPECT_EQ(s[1], 1.0f / 448.0f);  // the other block is unaffected
  EXPECT_EQ(q[3], 0x7F);           // inf / inf = NaN
  EXPECT_EQ(q[0], 0x00);           // 1 / inf = 0
  EXPECT_EQ(q[4], 0x80);           // -2 / inf = -0
  EXPECT_EQ(q[200], 0x7E);
}

TEST(Quantize1x128, EmptyShapesWriteNothing) {
  std::vector<uint8_t> q(16, 0x55);
  float s[2] = {-1.0f, -1.0f};
  const float x[1] = {1.0f};
  quantize_1x128(x, 0, 128, 128, q.data(), 128, s, false);
  quantize_1x128(nullptr, 0, 128, 128, nullptr, 128, nullptr, false);
  quantize_1x128(x, 1, 0, 0, q.data(), 0, s, true);
  EXPECT_EQ(s[0], -1.0f);
  EXPECT_EQ(s[1], -1.0f);
  for (uint8_t b : q) EXPECT_EQ(b, 0x55);
}

TEST(Quantize1x128, RejectsInvalidArguments) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(256);
  float s[2];
  EXPECT_THROW(quantize_1x128(x.data(), -1, 128, 128, q.data(), 128, s, false), Error);
  EXPECT_THROW(quantize_1x128(x.data(), 1, 128, 64, q.data(), 128, s, false), Error);
  EXPECT_THROW(quantize_1x128(x.data(), 1, 128, 128, q.data(), 100, s, false), Error);
  EXPECT_THROW(quantize_1x128(nullptr, 1, 128, 128, q.data(), 128, s, false), Error);
}

TEST(Quantize128x128, PartialBlocksAlongNAndK) {
  // N = 200 (blocks of 128 and 72 rows), K = 2880 (22 full blocks and one of 64 columns).
  const int64_t n = 200, k = 2880, ldw = k + 24, ldq = k + 48;
  const int64_t nnb = ceil_div(n, kQuantBlock), nkb = ceil_div(k, kQuantBlock);
  ASSERT_EQ(nnb, 2);
  ASSERT_EQ(nkb, 23);
  std::vector<float> w(n * ldw, -1e30f);  // poison in the padding columns
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w[r * ldw + c] = u(rng);
  // A distinct peak in every block, placed in the block's last valid row and column for odd
  // blocks (to catch off-by-one bounds), and at an interior position for even blocks.
  std::vector<float> peak(nnb * nkb);
  for (int64_t nb = 0; nb < nnb; ++nb)
    for (int64_t kb = 0; kb < nkb; ++kb) {
      const int64_t r1 = std::min(n, (nb + 1) * kQuantBlock), c1 = std::min(k, (kb + 1) * kQuantBlock);
      const bool edge = (nb + kb) % 2 == 1;
      const int64_t r = edge ? r1 - 1 : nb * kQuantBlock + 17;
      const int64_t c = edge ? c1 - 1 : kb * kQuantBlock + 33;
      const float p = 0.75f + 0.125f * static_cast<float>(kb) + 3.0f * static_cast<float>(nb);
      w[r * ldw + c] = (kb % 3 == 0) ? -p : p;
      peak[nb * nkb + kb] = p;
    }
  for (bool ue8m0 : {false, true}) {
    std::vector<uint8_t> q(n * ldq, 0x55);
    std::vector<float> s(nnb * nkb + 3, -1.0f);
    quantize_128x128(w.data(), n, k, ldw, q.data(), ldq, s.data(), ue8m0);
    for (int64_t b = 0; b < nnb * nkb; ++b) EXPECT_EQ(s[b], scale_reference(peak[b], ue8m0)) << "block " << b;
    for (int64_t b = nnb * nkb; b < nnb * nkb + 3; ++b) EXPECT_EQ(s[b], -1.0f);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c)
        ASSERT_TRUE(quantized_ok(w[r * ldw + c], q[r * ldq + c], s[(r / kQuantBlock) * nkb + c / kQuantBlock])) << "128x128 [" << r << ", " << c << "]";
      for (int64_t c = k; c < ldq; ++c) ASSERT_EQ(q[r * ldq + c], 0x55);
    }
  }
}

TEST(Quantize128x128, MatchesAnIndependentBlockAmax) {
  const int64_t n = 300, k = 520;
  std::vector<float> w = random_normal(n * k, 3, 0.02f);
  for (int64_t r = 0; r < n; ++r) w[r * k + (r * 7) % k] *= static_cast<float>(1 + r % 13);
  const int64_t nnb = ceil_div(n, kQuantBlock), nkb = ceil_div(k, kQuantBlock);
  std::vector<uint8_t> q(n * k);
  std::vector<float> s(nnb * nkb);
  quantize_128x128(w.data(), n, k, k, q.data(), k, s.data(), false);
  // amax via a single pass over all elements, scattering into blocks.
  std::vector<float> amax(nnb * nkb, 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      float& a = amax[(r / 128) * nkb + c / 128];
      a = std::max(a, std::fabs(w[r * k + c]));
    }
  for (int64_t b = 0; b < nnb * nkb; ++b) EXPECT_EQ(s[b], std::max(amax[b], 1e-4f) / 448.0f) << b;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) ASSERT_TRUE(quantized_ok(w[r * k + c], q[r * k + c], s[(r / 128) * nkb + c / 128])) << "w [" << r << ", " << c << "]";
}

TEST(Quantize128x128, DividesByTheScaleRatherThanMultiplyingByItsInverse) {
  const float amax = 3.0f;
  const std::vector<float> sensitive = division_sensitive_values(amax);
  ASSERT_GE(sensitive.size(), 4u);
  // A 128 x 256 weight: the sensitive values spread over both blocks, each led by amax.
  const int64_t n = 128, k = 256;
  std::vector<float> w(n * k, 0.0f);
  w[0] = amax;
  w[128] = -amax;
  for (size_t t = 0; t < sensitive.size(); ++t) w[(1 + 37 * t) % (n * k)] = sensitive[t];
  ASSERT_EQ(w[0], amax);
  ASSERT_EQ(w[128], -amax);
  std::vector<uint8_t> q(n * k);
  float sc[2];
  quantize_128x128(w.data(), n, k, k, q.data(), k, sc, false);
  ASSERT_EQ(sc[0], amax / 448.0f);
  ASSERT_EQ(sc[1], amax / 448.0f);
  for (int64_t t = 0; t < n * k; ++t) ASSERT_EQ(q[t], e4m3_brute_force(w[t] / sc[0])) << t;
}

TEST(Quantize128x128, SingleRowAndEmptyShapes) {
  std::vector<float> w(130);
  for (int i = 0; i < 130; ++i) w[i] = static_cast<float>(i) - 64.0f;
  std::vector<uint8_t> q(130);
  float s[2] = {0, 0};
  quantize_128x128(w.data(), 1, 130, 130, q.data(), 130, s, false);
  EXPECT_EQ(s[0], 64.0f / 448.0f);
  EXPECT_EQ(s[1], 65.0f / 448.0f);
  EXPECT_EQ(q[0], 0xFE);
  EXPECT_EQ(q[129], 0x7E);
  float t[1] = {-1.0f};
  quantize_128x128(w.data(), 0, 130, 130, q.data(), 130, t, false);
  quantize_128x128(nullptr, 5, 0, 0, nullptr, 0, nullptr, false);
  EXPECT_EQ(t[0], -1.0f);
  EXPECT_THROW(quantize_128x128(w.data(), 1, 130, 129, q.data(), 130, s, false), Error);
}

// ============================================================================================
// Activation-scale layouts
// ============================================================================================

TEST(SfaLayout, LeadingDimensionAndSize) {
  EXPECT_EQ(sfa_ld(0), 0);
  EXPECT_EQ(sfa_ld(1), 4);
  EXPECT_EQ(sfa_ld(4), 4);
  EXPECT_EQ(sfa_ld(5), 8);
  EXPECT_EQ(sfa_ld(4097), 4100);
  EXPECT_EQ(sfa_physical_size(5, 2880), 23 * 8);
  EXPECT_EQ(sfa_physical_size(128, 128), 128);
  EXPECT_EQ(sfa_physical_size(3, 1), 4);
  EXPECT_EQ(sfa_physical_size(0, 7168), 0);
}

TEST(SfaLayout, LogicalToPhysicalPlacesEveryEntryAndZeroesPadding) {
  const int64_t m = 5, k = 300;  // kb = 3, ld = 8
  const int64_t nkb = 3, ld = 8;
  std::vector<float> logical(m * nkb);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t kb = 0; kb < nkb; ++kb) logical[r * nkb + kb] = static_cast<float>(100 * r + kb + 1);
  std::vector<float> phys(sfa_physical_size(m, k) + 2, kNaN);
  sfa_logical_to_physical(logical.data(), m, k, phys.data());
  for (int64_t kb = 0; kb < nkb; ++kb) {
    for (int64_t r = 0; r < m; ++r) EXPECT_EQ(phys[kb * ld + r], static_cast<float>(100 * r + kb + 1));
    for (int64_t r = m; r < ld; ++r) EXPECT_EQ(bits_of(phys[kb * ld + r]), 0u) << "padding " << kb << "," << r;
  }
  EXPECT_TRUE(std::isnan(phys[nkb * ld]));  // nothing past the buffer
  EXPECT_TRUE(std::isnan(phys[nkb * ld + 1]));
  // Explicit spot checks of the formula physical[kb * sfa_ld(m) + row].
  EXPECT_EQ(phys[0], 1.0f);
  EXPECT_EQ(phys[1], 101.0f);
  EXPECT_EQ(phys[8], 2.0f);
  EXPECT_EQ(phys[2 * 8 + 4], 403.0f);
}

TEST(SfaLayout, RoundTripsForManyShapes) {
  for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 127, 128, 130}) {
    for (int64_t k : {1, 127, 128, 129, 256, 2880}) {
      const int64_t nkb = ceil_div(k, kQuantBlock);
      std::vector<float> logical(m * nkb);
      for (size_t i = 0; i < logical.size(); ++i) logical[i] = 0.5f + static_cast<float>(i);
      std::vector<float> phys(sfa_physical_size(m, k), -7.0f);
      sfa_logical_to_physical(logical.data(), m, k, phys.data());
      for (int64_t r = 0; r < m; ++r)
        for (int64_t kb = 0; kb < nkb; ++kb) ASSERT_EQ(phys[kb * sfa_ld(m) + r], logical[r * nkb + kb]);
      std::vector<float> back(m * nkb, -1.0f);
      sfa_physical_to_logical(phys.data(), m, k, back.data());
      ASSERT_EQ(back, logical) << "m=" << m << " k=" << k;
    }
  }
}

TEST(SfaLayout, EmptyShapes) {
  float buf[4] = {-1, -1, -1, -1};
  sfa_logical_to_physical(nullptr, 0, 256, nullptr);
  sfa_physical_to_logical(nullptr, 0, 256, nullptr);
  sfa_logical_to_physical(buf, 3, 0, buf);
  sfa_physical_to_logical(buf, 3, 0, buf);
  for (float v : buf) EXPECT_EQ(v, -1.0f);
}

}  // namespace
}  // namespace moekit
