// Shared helpers of the host-numerics CPU tests (test_numerics.cpp, test_quantize.cpp,
// test_gemm_reference.cpp): E4M3 and scale references written independently of the library.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "moekit/numerics.h"

namespace moekit::numerics_test {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
inline float float_of(uint32_t b) { return std::bit_cast<float>(b); }

inline bool is_e4m3_nan(uint8_t c) { return (c & 0x7F) == 0x7F; }

// Values of all 256 E4M3 codes computed from the format definition (bias 7, 3 mantissa bits,
// subnormals m * 2^-9), independently of e4m3_to_float. NaN codes hold NaN.
inline const double* e4m3_definition_table() {
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

inline double e4m3_value(int code) { return e4m3_definition_table()[code & 0xFF]; }

// Slow E4M3 reference: the nearest of the 254 finite codes by brute force (distance in double,
// exact for |x| ≤ 448), ties to the even code (even mantissa), ±0 chosen by the sign of x.
// Beyond ±448 (inf included) the result saturates to ±448 (satfinite; the nearest finite code
// too, but the double distances to huge x can no longer tell the codes apart). NaN gives the
// canonical 0x7F.
inline uint8_t e4m3_brute_force(float x) {
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
inline double e4m3_spacing(double y) {
  y = std::fabs(y);
  if (y < 0x1p-6) return 0x1p-9;
  int e = 0;
  std::frexp(y, &e);  // y in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - 1 - 3);
}

// Independent reference of quant_scale: smallest power of two ≥ s found by doubling/halving.
inline float scale_reference(float amax, bool ue8m0) {
  const float floored = std::isnan(amax) ? 1e-4f : std::max(amax, 1e-4f);
  const float s = floored / 448.0f;
  if (!ue8m0 || std::isinf(s)) return s;
  double p = 1.0;
  while (p < s) p *= 2.0;
  while (p / 2.0 >= s) p /= 2.0;
  return static_cast<float>(p);
}

inline bool is_power_of_two(float s) {
  int e = 0;
  return s > 0 && std::isfinite(s) && std::frexp(s, &e) == 0.5f;
}

inline std::vector<float> random_normal(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace moekit::numerics_test
