// CPU tests of the host numerics (include/moekit/numerics.h, SPEC §1–2): E4M3 and BF16
// conversions. Quantizers: test_quantize.cpp; the float64 GEMM reference: test_gemm_reference.cpp.

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
// E4M3
// ============================================================================================

TEST(E4M3, DecodesKnownCodes) {
  EXPECT_EQ(bits_of(e4m3_to_float(0x00)), bits_of(0.0f));
  EXPECT_EQ(bits_of(e4m3_to_float(0x80)), bits_of(-0.0f));
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);     // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7 * 0x1p-9f);  // largest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), 0x1p-6f);     // smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x39), 1.125f);
  EXPECT_EQ(e4m3_to_float(0x3F), 1.875f);
  EXPECT_EQ(e4m3_to_float(0x40), 2.0f);
  EXPECT_EQ(e4m3_to_float(0xC0), -2.0f);
  EXPECT_EQ(e4m3_to_float(0x70), 128.0f);
  EXPECT_EQ(e4m3_to_float(0x78), 256.0f);
  EXPECT_EQ(e4m3_to_float(0x7D), 416.0f);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
}

TEST(E4M3, EveryCodeDecodesToItsDefinitionAndReencodesToItself) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    const float v = e4m3_to_float(code);
    if (is_e4m3_nan(code)) {
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      EXPECT_EQ(e4m3_from_float(v), 0x7F) << "code " << c;
      continue;
    }
    ++finite;
    EXPECT_EQ(static_cast<double>(v), e4m3_value(c)) << "code " << c;
    EXPECT_EQ(std::signbit(v), (c & 0x80) != 0) << "code " << c;
    EXPECT_EQ(e4m3_from_float(v), code) << "code " << c;
  }
  EXPECT_EQ(finite, 254);
}

TEST(E4M3, DecodeIsStrictlyMonotonic) {
  for (int c = 0; c < 0x7E; ++c) {
    EXPECT_LT(e4m3_to_float(static_cast<uint8_t>(c)), e4m3_to_float(static_cast<uint8_t>(c + 1))) << c;
    EXPECT_GT(e4m3_to_float(static_cast<uint8_t>(0x80 | c)), e4m3_to_float(static_cast<uint8_t>(0x80 | (c + 1))))
        << c;
  }
}

TEST(E4M3, MidpointsRoundToEven) {
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_float(static_cast<uint8_t>(c));
    const float hi = e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) * 0.5f;  // exact: both have ≤ 4 significant bits
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2.0);
    const uint8_t even = static_cast<uint8_t>((c & 1) == 0 ? c : c + 1);
    EXPECT_EQ(e4m3_from_float(mid), even) << "midpoint " << mid;
    EXPECT_EQ(e4m3_from_float(-mid), 0x80 | even) << "midpoint " << -mid;
  }
  // Spot checks of the rule in different binades.
  EXPECT_EQ(e4m3_from_float(1.0625f), 0x38);  // between 1 (0x38) and 1.125 (0x39)
  EXPECT_EQ(e4m3_from_float(1.1875f), 0x3A);  // between 1.125 (0x39) and 1.25 (0x3A)
  EXPECT_EQ(e4m3_from_float(432.0f), 0x7E);   // between 416 (0x7D) and 448 (0x7E)
  EXPECT_EQ(e4m3_from_float(3 * 0x1p-10f), 0x02);  // subnormal: between 1 and 2 (x 2^-9)
  EXPECT_EQ(e4m3_from_float(15 * 0x1p-10f), 0x08);  // between 7*2^-9 and 2^-6: to 0x08
}

TEST(E4M3, JustAboveAndBelowMidpointsRoundToTheNearerCode) {
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_float(static_cast<uint8_t>(c));
    const float hi = e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) * 0.5f;
    const float above = std::nextafter(mid, kInf);
    const float below = std::nextafter(mid, 0.0f);
    EXPECT_EQ(e4m3_from_float(above), c + 1) << above;
    EXPECT_EQ(e4m3_from_float(below), c) << below;
    EXPECT_EQ(e4m3_from_float(-above), 0x80 | (c + 1)) << -above;
    EXPECT_EQ(e4m3_from_float(-below), 0x80 | c) << -below;
    // Just beside the codes themselves.
    EXPECT_EQ(e4m3_from_float(std::nextafter(hi, 0.0f)), c + 1);
    if (c > 0) {
      EXPECT_EQ(e4m3_from_float(std::nextafter(lo, kInf)), c);
    }
    // A quarter of the way: nearest is unambiguous.
    EXPECT_EQ(e4m3_from_float(lo + (hi - lo) * 0.25f), c);
    EXPECT_EQ(e4m3_from_float(lo + (hi - lo) * 0.75f), c + 1);
  }
}

TEST(E4M3, SubnormalsAndUnderflow) {
  for (int mant = 1; mant < 8; ++mant) {
    EXPECT_EQ(e4m3_from_float(mant * 0x1p-9f), mant);
    EXPECT_EQ(e4m3_from_float(-mant * 0x1p-9f), 0x80 | mant);
  }
  // Half the smallest subnormal is a tie between 0 and 0x01: goes to 0 (even).
  EXPECT_EQ(e4m3_from_float(0x1p-10f), 0x00);
  EXPECT_EQ(e4m3_from_float(-0x1p-10f), 0x80);
  EXPECT_EQ(e4m3_from_float(std::nextafter(0x1p-10f, kInf)), 0x01);
  EXPECT_EQ(e4m3_from_float(std::nextafter(-0x1p-10f, -kInf)), 0x81);
  EXPECT_EQ(e4m3_from_float(std::nextafter(0x1p-10f, 0.0f)), 0x00);
  // Tiny values, float subnormals and the smallest float round to zero with their sign.
  for (float t : {0x1p-11f, 0x1p-20f, 1e-30f, std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), 3.0e-42f}) {
    EXPECT_EQ(e4m3_from_float(t), 0x00) << t;
    EXPECT_EQ(e4m3_from_float(-t), 0x80) << t;
  }
  // Rounding up across the subnormal/normal boundary, and the boundary itself.
  EXPECT_EQ(e4m3_from_float(std::nextafter(0x1p-6f, 0.0f)), 0x08);
  EXPECT_EQ(e4m3_from_float(0x1p-6f), 0x08);
  EXPECT_EQ(e4m3_from_float(0x1p-6f + 0x1p-9f), 0x09);  // 2^-6 * 1.125
}

TEST(E4M3, SignedZero) {
  EXPECT_EQ(e4m3_from_float(0.0f), 0x00);
  EXPECT_EQ(e4m3_from_float(-0.0f), 0x80);
  EXPECT_EQ(bits_of(e4m3_to_float(e4m3_from_float(-0.0f))), bits_of(-0.0f));
}

TEST(E4M3, SaturatesToMaxFinite) {
  const float big[] = {448.0f, std::nextafter(448.0f, kInf), 449.0f, 463.99f, 464.0f, 464.01f, 480.0f, 512.0f,
                       1e4f, 1e6f, 3.0e38f, std::numeric_limits<float>::max(), kInf};
  for (float v : big) {
    EXPECT_EQ(e4m3_from_float(v), 0x7E) << v;
    EXPECT_EQ(e4m3_from_float(-v), 0xFE) << -v;
  }
  // Below 448 the normal rounding applies.
  EXPECT_EQ(e4m3_from_float(std::nextafter(448.0f, 0.0f)), 0x7E);
  EXPECT_EQ(e4m3_from_float(431.99f), 0x7D);
  EXPECT_EQ(e4m3_from_float(-431.99f), 0xFD);
}

TEST(E4M3, NaNIsCanonicalWhateverItsSignOrPayload) {
  const uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FBFFFFFu,
                           0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u, 0xFF812345u};
  for (uint32_t b : nans) {
    ASSERT_TRUE(std::isnan(float_of(b)));
    EXPECT_EQ(e4m3_from_float(float_of(b)), 0x7F) << std::hex << b;
  }
  // Just outside the NaN range: infinities saturate.
  EXPECT_EQ(e4m3_from_float(float_of(0x7F800000u)), 0x7E);
  EXPECT_EQ(e4m3_from_float(float_of(0xFF800000u)), 0xFE);
}

TEST(E4M3, RandomMatchesBruteForce) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<uint32_t> any_bits;
  std::uniform_int_distribution<int> exp_dist(-14, 10);
  std::uniform_int_distribution<uint32_t> mant_dist(0, (1u << 23) - 1);
  std::uniform_int_distribution<int> code_dist(0, 0x7D);
  std::uniform_int_distribution<int> nudge_dist(-3, 3);
  int checked = 0;
  for (int it = 0; it < 150000; ++it) {
    float x = 0.0f;
    switch (it % 3) {
      case 0:  // any bit pattern: mostly huge, tiny, NaN or inf
        x = float_of(any_bits(rng));
        break;
      case 1: {  // a random float with an exponent around the E4M3 range
        const uint32_t sign = (it & 4) ? 0x80000000u : 0u;
        x = float_of(sign | (static_cast<uint32_t>(127 + exp_dist(rng)) << 23) | mant_dist(rng));
        break;
      }
      default: {  // within a few float ulps of a midpoint between two codes
        const int c = code_dist(rng);
        float v = (e4m3_to_float(static_cast<uint8_t>(c)) + e4m3_to_float(static_cast<uint8_t>(c + 1))) * 0.5f;
        v = float_of(bits_of(v) + static_cast<uint32_t>(nudge_dist(rng)));
        x = (it & 8) ? -v : v;
      }
    }
    ASSERT_EQ(e4m3_from_float(x), e4m3_brute_force(x)) << "x = " << x << " bits " << std::hex << bits_of(x);
    ++checked;
  }
  EXPECT_EQ(checked, 150000);
}

TEST(E4M3, DenseSweepOfTheSubnormalAndTopBinadesMatchesBruteForce) {
  // Every 61st float bit pattern in [2^-12, 2^-5) and in [2^8, 2^9), both signs.
  const std::pair<uint32_t, uint32_t> ranges[] = {{bits_of(0x1p-12f), bits_of(0x1p-5f)},
                                                  {bits_of(256.0f), bits_of(512.0f)}};
  for (auto [b0, b1] : ranges) {
    for (uint32_t b = b0; b < b1; b += 61 * 17) {
      const float x = float_of(b);
      ASSERT_EQ(e4m3_from_float(x), e4m3_brute_force(x)) << x;
      ASSERT_EQ(e4m3_from_float(-x), e4m3_brute_force(-x)) << -x;
    }
  }
}

// ============================================================================================
// BF16
// ============================================================================================

// Slow BF16 reference: the nearer of the two bf16 values that bracket x, ties to even.
uint16_t bf16_reference(float x) {
  const uint32_t b = bits_of(x);
  const uint16_t lo = static_cast<uint16_t>(b >> 16);  // truncation (toward zero in magnitude)
  if ((b & 0xFFFFu) == 0) return lo;
  const uint16_t hi = static_cast<uint16_t>(lo + 1);  // next magnitude (may be inf)
  const double ax = std::fabs(static_cast<double>(x));
  const double vlo = std::fabs(static_cast<double>(float_of(static_cast<uint32_t>(lo) << 16)));
  // The value above the largest finite bf16 magnitude, for distance purposes, is 2^128.
  const double vhi = ((hi & 0x7FFFu) == 0x7F80u) ? std::ldexp(1.0, 128)
                                                 : std::fabs(static_cast<double>(float_of(static_cast<uint32_t>(hi) << 16)));
  const double dlo = ax - vlo;
  const double dhi = vhi - ax;
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(BF16, KnownValues) {
  EXPECT_EQ(bf16_from_float(0.0f), 0x0000);
  EXPECT_EQ(bf16_from_float(-0.0f), 0x8000);
  EXPECT_EQ(bf16_from_float(1.0f), 0x3F80);
  EXPECT_EQ(bf16_from_float(-2.0f), 0xC000);
  EXPECT_EQ(bf16_from_float(448.0f), 0x43E0);
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xC0490000u >> 16), -3.140625f);
  EXPECT_EQ(bf16_from_float(3.14159265f), 0x4049);  // 3.140625
  EXPECT_EQ(bf16_to_float(0x7F80), kInf);
  EXPECT_EQ(bf16_to_float(0xFF80), -kInf);
  EXPECT_EQ(bf16_to_float(0x0001), float_of(0x00010000u));  // bf16 subnormal
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_from_float(float_of(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(bf16_from_float(float_of(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(bf16_from_float(float_of(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(bf16_from_float(float_of(0x3F807FFFu)), 0x3F80);  // below the tie
  EXPECT_EQ(bf16_from_float(float_of(0xBF818000u)), 0xBF82);  // negative tie
  EXPECT_EQ(bf16_from_float(float_of(0x3FFF8000u)), 0x4000);  // carry into the exponent
  EXPECT_EQ(bf16_from_float(float_of(0x00008000u)), 0x0000);  // subnormal tie to even zero
  EXPECT_EQ(bf16_from_float(float_of(0x00018000u)), 0x0002);
}

TEST(BF16, OverflowGivesInfinityAndInfinityStays) {
  EXPECT_EQ(bf16_from_float(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(bf16_from_float(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(bf16_from_float(float_of(0x7F7F7FFFu)), 0x7F7F);  // stays the largest finite bf16
  EXPECT_EQ(bf16_from_float(kInf), 0x7F80);
  EXPECT_EQ(bf16_from_float(-kInf), 0xFF80);
}

TEST(BF16, NaNBecomesCanonicalQuietNaN) {
  for (uint32_t b : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7F810000u, 0x7FFFFFFFu}) {
    const uint16_t h = bf16_from_float(float_of(b));
    EXPECT_EQ(h, 0x7FFF) << std::hex << b;
    EXPECT_TRUE(std::isnan(bf16_to_float(h)));
  }
}

TEST(BF16, EveryCodeDecodesExactlyAndRoundTrips) {
  for (uint32_t c = 0; c < 0x10000u; ++c) {
    const float v = bf16_to_float(static_cast<uint16_t>(c));
    ASSERT_EQ(bits_of(v), c << 16);
    if (std::isnan(v)) {
      EXPECT_EQ(bf16_from_float(v), 0x7FFF);
    } else {
      ASSERT_EQ(bf16_from_float(v), c);
    }
  }
}

TEST(BF16, RandomMatchesReference) {
  std::mt19937 rng(777);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int it = 0; it < 300000; ++it) {
    uint32_t b = any_bits(rng);
    if (it % 4 == 1) b = (b & 0xFFFF0000u) | 0x8000u;  // exact ties
    const float x = float_of(b);
    if (std::isnan(x)) continue;
    ASSERT_EQ(bf16_from_float(x), bf16_reference(x)) << std::hex << b;
  }
}

}  // namespace
}  // namespace moekit
