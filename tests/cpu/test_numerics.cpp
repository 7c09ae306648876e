// CPU tests of the host numerics (include/moekit/numerics.h, SPEC §1–2): E4M3 and BF16
// conversions, quantization scales, the 1x128 and 128x128 quantizers, the activation-scale
// layouts, the float64 GEMM reference and the relative L2 error.
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

namespace moekit {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t b) { return std::bit_cast<float>(b); }

bool is_e4m3_nan(uint8_t c) { return (c & 0x7F) == 0x7F; }

// Values of all 256 E4M3 codes computed from the format definition (bias 7, 3 mantissa bits,
// subnormals m * 2^-9), independently of e4m3_to_float. NaN codes hold NaN.
const double* e4m3_definition_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(256);
    for (int c = 0; c < 256; ++c) {
      const int e = (c >> 3) & 0xF;
      const int mant = c & 7;
      double v = e == 0 ? std::ldexp(static_cast<double>(mant), -9) : std::ldexp(1.0 + mant / 8.0, e - 7);
      if ((c & 0x7F) == 0x7F) v = std::numeric_limits<double>::quiet_NaN();
      t[c] = (c & 0x80) ? -v : v;
    }
    return t;
  }();
  return table.data();
}

double e4m3_value(int code) { return e4m3_definition_table()[code & 0xFF]; }

// Slow E4M3 reference: the nearest of the 254 finite codes by brute force (distance in double,
// exact for |x| ≤ 448), ties to the even code (even mantissa), ±0 chosen by the sign of x.
// Beyond ±448 (inf included) the result saturates to ±448 (satfinite; the nearest finite code
// too, but the double distances to huge x can no longer tell the codes apart). NaN gives the
// canonical 0x7F.
uint8_t e4m3_brute_force(float x) {
  if (std::isnan(x)) return 0x7F;
  if (std::fabs(x) > 448.0f) return x > 0 ? 0x7E : 0xFE;
  int best = -1;
  double best_dist = 0.0;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    const double v = e4m3_value(c);
    const double dist = std::fabs(static_cast<double>(x) - v);
    bool better = best < 0 || dist < best_dist;
    if (!better && dist == best_dist) {
      const bool c_even = (c & 1) == 0;
      const bool best_even = (best & 1) == 0;
      if (c_even != best_even) {
        better = c_even;
      } else if (v == 0.0) {  // +0 vs -0: follow the sign of x
        better = ((c & 0x80) != 0) == std::signbit(x);
      }
    }
    if (better) {
      best = c;
      best_dist = dist;
    }
  }
  return static_cast<uint8_t>(best);
}

// Distance between neighbouring E4M3 values in the binade of |y| (2^-9 in the subnormal range).
double e4m3_spacing(double y) {
  y = std::fabs(y);
  if (y < 0x1p-6) return 0x1p-9;
  int e = 0;
  std::frexp(y, &e);  // y in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - 3);
}

// Independent reference of quant_scale: smallest power of two ≥ s found by doubling/halving.
float scale_reference(float amax, bool ue8m0) {
  const float floored = std::isnan(amax) ? 1e-4f : std::max(amax, 1e-4f);
  const float s = floored / 448.0f;
  if (!ue8m0 || std::isinf(s)) return s;
  double p = 1.0;
  while (p < s) p *= 2.0;
  while (p / 2.0 >= s) p /= 2.0;
  return static_cast<float>(p);
}

bool is_power_of_two(float s) {
  int e = 0;
  return s > 0 && std::isfinite(s) && std::frexp(s, &e) == 0.5f;
}

std::vector<float> random_normal(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

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

// ============================================================================================
// GEMM reference
// ============================================================================================

struct QuantizedProblem {
  int64_t m, n, k, lda, ldb, nkb, nnb;
  std::vector<float> a, b;    // original values, row stride k
  std::vector<uint8_t> qa, qb;  // row strides lda, ldb
  std::vector<float> sa, sb;
};

QuantizedProblem make_problem(int64_t m, int64_t n, int64_t k, int64_t lda_pad, int64_t ldb_pad, uint32_t seed,
                              bool ue8m0 = false) {
  QuantizedProblem p;
  p.m = m, p.n = n, p.k = k, p.lda = k + lda_pad, p.ldb = k + ldb_pad;
  p.nkb = ceil_div(k, kQuantBlock), p.nnb = ceil_div(n, kQuantBlock);
  p.a = random_normal(m * k, seed, 1.0f);
  p.b = random_normal(n * k, seed + 1, 0.05f);
  // Different magnitudes per row / block so the scales matter.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) p.a[i * k + c] *= 1.0f + static_cast<float>((i * 3 + c / 128) % 5);
  p.qa.assign(m * p.lda, 0x7F);  // NaN codes in the stride padding: must never be read
  p.qb.assign(n * p.ldb, 0x7F);
  p.sa.resize(m * p.nkb);
  p.sb.resize(p.nnb * p.nkb);
  quantize_1x128(p.a.data(), m, k, k, p.qa.data(), p.lda, p.sa.data(), ue8m0);
  quantize_128x128(p.b.data(), n, k, k, p.qb.data(), p.ldb, p.sb.data(), ue8m0);
  return p;
}

// Naive reference written differently from the library: dequantize every element with its
// scale first, then one double dot product per output element over all k (no K blocks).
std::vector<double> naive_gemm(const QuantizedProblem& p) {
  std::vector<double> da(p.m * p.k), db(p.n * p.k);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t c = 0; c < p.k; ++c)
      da[i * p.k + c] = e4m3_value(p.qa[i * p.lda + c]) * p.sa[i * p.nkb + c / 128];
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t c = 0; c < p.k; ++c)
      db[j * p.k + c] = e4m3_value(p.qb[j * p.ldb + c]) * p.sb[(j / 128) * p.nkb + c / 128];
  std::vector<double> d(p.m * p.n, 0.0);
  for (int64_t c = 0; c < p.k; ++c)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) d[i * p.n + j] += da[i * p.k + c] * db[j * p.k + c];
  return d;
}

// Worst-case relative rounding of a float64 sum of k terms is about k * 2^-53 of Σ|terms| for
// each of the two computations; tolerances are (k + 8) * 2^-52 * Σ|terms|.
constexpr double kSumTolerance = 0x1p-52;

// Σ_k |a·b| per output, for a rounding-error bound.
std::vector<double> naive_abs_gemm(const QuantizedProblem& p) {
  std::vector<double> d(p.m * p.n, 0.0);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double s = 0.0;
      for (int64_t c = 0; c < p.k; ++c)
        s += std::fabs(e4m3_value(p.qa[i * p.lda + c]) * p.sa[i * p.nkb + c / 128] *
                       e4m3_value(p.qb[j * p.ldb + c]) * p.sb[(j / 128) * p.nkb + c / 128]);
      d[i * p.n + j] = s;
    }
  return d;
}

TEST(GemmReference, MatchesNaiveTripleLoop) {
  // Partial blocks along K (300 = 2 x 128 + 44) and N (200 = 128 + 72), padded strides.
  const QuantizedProblem p = make_problem(37, 200, 300, 20, 36, 11);
  std::vector<double> d(p.m * p.n, kNaN);
  gemm_reference(p.qa.data(), p.lda, p.sa.data(), p.qb.data(), p.ldb, p.sb.data(), p.m, p.n, p.k, d.data());
  const std::vector<double> ref = naive_gemm(p);
  const std::vector<double> mag = naive_abs_gemm(p);
  for (int64_t t = 0; t < p.m * p.n; ++t) {
    ASSERT_TRUE(std::isfinite(d[t])) << t;
    ASSERT_NEAR(d[t], ref[t], kSumTolerance * static_cast<double>(p.k + 8) * mag[t]) << t;
  }
}

TEST(GemmReference, ExactWithPowerOfTwoScales) {
  // With ue8m0 scales every K-block term is exact, and these sums stay far below 2^53 ulps, so
  // the reference must equal the naive sum exactly.
  const QuantizedProblem p = make_problem(9, 131, 384, 0, 16, 21, /*ue8m0=*/true);
  std::vector<double> d(p.m * p.n);
  gemm_reference(p.qa.data(), p.lda, p.sa.data(), p.qb.data(), p.ldb, p.sb.data(), p.m, p.n, p.k, d.data());
  const std::vector<double> ref = naive_gemm(p);
  for (int64_t t = 0; t < p.m * p.n; ++t) ASSERT_EQ(d[t], ref[t]) << t;
}

TEST(GemmReference, FollowsTheDocumentedFloat64Formula) {
  // d[i, j] = Σ_kb (sa · sb) · inner_kb, summed in increasing kb in float64, where inner_kb is
  // the exact dot product of the codes' values (each E4M3 value is an integer multiple of 2^-9,
  // so the test computes it in int64). This is the documented rounding: one rounding per K-block
  // term and one per add, so the result is bit-exact whatever the inner evaluation order.
  // Codes are uniform over all 254 finite codes, so inner sums span ~40 significant bits and a
  // different association, e.g. sa · (sb · inner), would round differently.
  const int64_t m = 13, n = 140, k = 700, lda = k + 4, ldb = k + 12;
  const int64_t nkb = ceil_div(k, kQuantBlock), nnb = ceil_div(n, kQuantBlock);
  std::mt19937 rng(71);
  std::uniform_int_distribution<int> code(0, 253);
  auto finite_code = [&] {
    const int c = code(rng);
    return static_cast<uint8_t>(c < 127 ? c : c + 1);  // skip 0x7F (and 0xFF: 253 + 1 = 0xFE max)
  };
  std::vector<uint8_t> qa(m * lda, 0x7F), qb(n * ldb, 0x7F);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) qa[i * lda + c] = finite_code();
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < k; ++c) qb[j * ldb + c] = finite_code();
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-20, 4);
  std::vector<float> sa(m * nkb), sb(nnb * nkb);
  for (auto& v : sa) v = std::ldexp(mant(rng), ex(rng));
  for (auto& v : sb) v = std::ldexp(mant(rng), ex(rng));
  std::vector<double> d(m * n);
  gemm_reference(qa.data(), lda, sa.data(), qb.data(), ldb, sb.data(), m, n, k, d.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t kb = 0; kb < nkb; ++kb) {
        int64_t inner = 0;  // in units of 2^-18
        for (int64_t c = kb * 128; c < std::min(k, kb * 128 + 128); ++c) {
          const auto va = static_cast<int64_t>(e4m3_value(qa[i * lda + c]) * 512.0);
          const auto vb = static_cast<int64_t>(e4m3_value(qb[j * ldb + c]) * 512.0);
          inner += va * vb;
        }
        const double sab = static_cast<double>(sa[i * nkb + kb]) * static_cast<double>(sb[(j / 128) * nkb + kb]);
        acc += sab * std::ldexp(static_cast<double>(inner), -18);
      }
      ASSERT_EQ(d[i * n + j], acc) << i << "," << j;
    }
  }
}

TEST(GemmReference, HandComputedValues) {
  // m = 1, n = 2, k = 130 (two K blocks). a = 1 everywhere; b row 0 = 2, row 1 = -0.5.
  const int64_t k = 130;
  std::vector<uint8_t> qa(k, e4m3_from_float(1.0f)), qb(2 * k);
  for (int64_t c = 0; c < k; ++c) {
    qb[c] = e4m3_from_float(2.0f);
    qb[k + c] = e4m3_from_float(-0.5f);
  }
  const float sa[2] = {0.5f, 3.0f};
  const float sb[2] = {0.25f, 10.0f};
  double d[2];
  gemm_reference(qa.data(), k, sa, qb.data(), k, sb, 1, 2, k, d);
  // row 0: 0.5*0.25*(128*2) + 3*10*(2*2) = 32 + 120
  EXPECT_EQ(d[0], 152.0);
  // row 1: 0.5*0.25*(128*-0.5) + 3*10*(2*-0.5) = -8 - 30
  EXPECT_EQ(d[1], -38.0);
}

TEST(GemmReference, DeterministicAndIndependentOfThreading) {
  // Large enough to use several threads; each row computed alone (single-threaded path) must be
  // bit-identical to the full multithreaded call.
  const QuantizedProblem p = make_problem(96, 320, 1024, 16, 0, 31);
  std::vector<double> d1(p.m * p.n), d2(p.m * p.n, 0.0);
  gemm_reference(p.qa.data(), p.lda, p.sa.data(), p.qb.data(), p.ldb, p.sb.data(), p.m, p.n, p.k, d1.data());
  gemm_reference(p.qa.data(), p.lda, p.sa.data(), p.qb.data(), p.ldb, p.sb.data(), p.m, p.n, p.k, d2.data());
  ASSERT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(double)));
  for (int64_t i = 0; i < p.m; i += 7) {
    std::vector<double> row(p.n);
    gemm_reference(p.qa.data() + i * p.lda, p.lda, p.sa.data() + i * p.nkb, p.qb.data(), p.ldb, p.sb.data(), 1, p.n,
                   p.k, row.data());
    ASSERT_EQ(0, std::memcmp(row.data(), d1.data() + i * p.n, p.n * sizeof(double))) << "row " << i;
  }
  const std::vector<double> ref = naive_gemm(p);
  const std::vector<double> mag = naive_abs_gemm(p);
  for (int64_t t = 0; t < p.m * p.n; ++t)
    ASSERT_NEAR(d1[t], ref[t], kSumTolerance * static_cast<double>(p.k + 8) * mag[t]) << t;
}

TEST(GemmReference, CloseToTheUnquantizedProduct) {
  const QuantizedProblem p = make_problem(32, 256, 512, 0, 0, 51);
  std::vector<double> d(p.m * p.n);
  gemm_reference(p.qa.data(), p.lda, p.sa.data(), p.qb.data(), p.ldb, p.sb.data(), p.m, p.n, p.k, d.data());
  std::vector<double> exact(p.m * p.n, 0.0);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double s = 0.0;
      for (int64_t c = 0; c < p.k; ++c) s += static_cast<double>(p.a[i * p.k + c]) * p.b[j * p.k + c];
      exact[i * p.n + j] = s;
    }
  std::vector<float> df(d.begin(), d.end());
  const double err = relative_l2_error(df.data(), exact.data(), df.size());
  // E4M3 keeps 3 mantissa bits: ~2-3% relative error per operand, about 4% on the product.
  EXPECT_GT(err, 0.005);
  EXPECT_LT(err, 0.08);
}

TEST(GemmReference, NaNCodePropagatesToItsRowAndColumnOnly) {
  QuantizedProblem p = make_problem(4, 130, 256, 0, 0, 61);
  p.qa[2 * p.lda + 200] = 0x7F;  // row 2, K block 1
  p.qb[129 * p.ldb + 5] = 0xFF;  // column 129, K block 0
  std::vector<double> d(p.m * p.n);
  gemm_reference(p.qa.data(), p.lda, p.sa.data(), p.qb.data(), p.ldb, p.sb.data(), p.m, p.n, p.k, d.data());
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j)
      EXPECT_EQ(std::isnan(d[i * p.n + j]), i == 2 || j == 129) << i << "," << j;
}

TEST(GemmReference, EmptyShapes) {
  const uint8_t qa[4] = {0x38, 0x38, 0x38, 0x38};
  const float s[1] = {1.0f};
  double d[6] = {7, 7, 7, 7, 7, 7};
  gemm_reference(qa, 0, s, qa, 0, s, 2, 3, 0, d);  // k = 0: zeros
  for (double v : d) EXPECT_EQ(v, 0.0);
  double e[2] = {7, 7};
  gemm_reference(qa, 4, s, qa, 4, s, 0, 2, 4, e);  // m = 0: nothing
  gemm_reference(qa, 4, s, qa, 4, s, 2, 0, 4, e);  // n = 0: nothing
  gemm_reference(nullptr, 4, nullptr, nullptr, 4, nullptr, 0, 0, 4, nullptr);
  EXPECT_EQ(e[0], 7.0);
  EXPECT_EQ(e[1], 7.0);
  EXPECT_THROW(gemm_reference(qa, 2, s, qa, 4, s, 1, 1, 4, e), Error);
}

// ============================================================================================
// Relative L2 error
// ============================================================================================

TEST(RelativeL2Error, IdenticalIsZero) {
  const float out[3] = {1.0f, -2.5f, 0.0f};
  const double ref[3] = {1.0, -2.5, 0.0};
  EXPECT_EQ(relative_l2_error(out, ref, 3), 0.0);
}

TEST(RelativeL2Error, KnownValues) {
  const float out[2] = {1.0f, 2.0f};
  const double ref[2] = {1.0, 1.0};
  EXPECT_DOUBLE_EQ(relative_l2_error(out, ref, 2), 1.0 / std::sqrt(2.0));
  const float out2[3] = {3.0f, 0.0f, 0.0f};
  const double ref2[3] = {0.0, 4.0, 0.0};
  EXPECT_DOUBLE_EQ(relative_l2_error(out2, ref2, 3), 5.0 / 4.0);
  // The float→double conversion is exact: a one-ulp bf16-like difference is measured exactly.
  const float out3[1] = {1.0078125f};
  const double ref3[1] = {1.0};
  EXPECT_EQ(relative_l2_error(out3, ref3, 1), 0.0078125);
}

TEST(RelativeL2Error, ZeroReferenceGivesAbsoluteNorm) {
  const float out[2] = {3.0f, -4.0f};
  const double ref[2] = {0.0, -0.0};
  EXPECT_DOUBLE_EQ(relative_l2_error(out, ref, 2), 5.0);
  const float zeros[2] = {0.0f, -0.0f};
  EXPECT_EQ(relative_l2_error(zeros, ref, 2), 0.0);
}

TEST(RelativeL2Error, NaNGivesNaN) {
  const float out[3] = {1.0f, kNaN, 2.0f};
  const double ref[3] = {1.0, 1.0, 2.0};
  EXPECT_TRUE(std::isnan(relative_l2_error(out, ref, 3)));
  const float out2[3] = {1.0f, 1.0f, 2.0f};
  const double ref2[3] = {1.0, std::numeric_limits<double>::quiet_NaN(), 2.0};
  EXPECT_TRUE(std::isnan(relative_l2_error(out2, ref2, 3)));
  const double zero_ref[3] = {0.0, 0.0, 0.0};
  EXPECT_TRUE(std::isnan(relative_l2_error(out, zero_ref, 3)));
}

TEST(RelativeL2Error, EmptyIsZero) { EXPECT_EQ(relative_l2_error(nullptr, nullptr, 0), 0.0); }

TEST(RelativeL2Error, NoOverflowOrUnderflow) {
  const float zero[2] = {0.0f, 0.0f};
  const double huge[2] = {3e300, 4e300};
  EXPECT_DOUBLE_EQ(relative_l2_error(zero, huge, 2), 1.0);
  const double tiny[2] = {3e-310, 4e-310};  // subnormal doubles
  EXPECT_DOUBLE_EQ(relative_l2_error(zero, tiny, 2), 1.0);
  const float big[2] = {3e38f, 3e38f};
  const double big_ref[2] = {static_cast<double>(3e38f) / 2, static_cast<double>(3e38f) / 2};
  EXPECT_DOUBLE_EQ(relative_l2_error(big, big_ref, 2), 1.0);
  const float small[1] = {1e-45f};  // float denorm_min
  const double zref[1] = {0.0};
  EXPECT_DOUBLE_EQ(relative_l2_error(small, zref, 1), static_cast<double>(1e-45f));
}

TEST(RelativeL2Error, Infinities) {
  // Matching infinities count as exact; an infinite difference over a finite reference is inf.
  const float out[2] = {kInf, 1.0f};
  const double ref_same[2] = {std::numeric_limits<double>::infinity(), 1.0};
  EXPECT_EQ(relative_l2_error(out, ref_same, 2), 0.0);
  const double ref_finite[2] = {5.0, 1.0};
  EXPECT_EQ(relative_l2_error(out, ref_finite, 2), std::numeric_limits<double>::infinity());
  const double ref_neg[2] = {-std::numeric_limits<double>::infinity(), 1.0};
  EXPECT_TRUE(std::isnan(relative_l2_error(out, ref_neg, 2)));
}

}  // namespace
}  // namespace moekit
