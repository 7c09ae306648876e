// MXFP4 on the host: codes, quantizer, exact dequantization, the FP8 form and gpt-oss's row order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/sm90/mxfp4_expand.cuh"
#include "moekit/error.h"
#include "moekit/mxfp4.h"
#include "moekit/numerics.h"

namespace {

using moekit::kMxfp4Block;

// Weights as a checkpoint's: normal values rounded to bf16.
std::vector<float> checkpoint_like(int64_t rows, int64_t k, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> w(size_t(rows * k));
  for (float& v : w) v = moekit::bf16_to_float(moekit::bf16_from_float(nd(rng)));
  return w;
}

TEST(Mxfp4, E2m1CodesAreTheOcpValues) {
  // OCP MX E2M1: codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign.
  const float mags[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 16; ++c) {
    const float v = moekit::e2m1_to_float(c);
    EXPECT_EQ(std::fabs(v), mags[c & 7]) << int(c);
    EXPECT_EQ(std::signbit(v), (c & 8) != 0) << int(c);
    EXPECT_EQ(moekit::e2m1_from_float(v), c) << int(c);  // every code round-trips (−0 included)
    EXPECT_EQ(moekit::e2m1_to_float(uint8_t(c | 0xF0)), v) << "high bits ignored";
  }
}

TEST(Mxfp4, E2m1RoundsToNearestTiesToEven) {
  EXPECT_EQ(moekit::e2m1_from_float(0.25f), 0u);   // tie 0 / 0.5 → 0 (code 0 even)
  EXPECT_EQ(moekit::e2m1_from_float(0.26f), 1u);
  EXPECT_EQ(moekit::e2m1_from_float(0.75f), 2u);   // tie 0.5 / 1 → 1 (code 2)
  EXPECT_EQ(moekit::e2m1_from_float(1.25f), 2u);   // tie 1 / 1.5 → 1
  EXPECT_EQ(moekit::e2m1_from_float(1.75f), 4u);   // tie 1.5 / 2 → 2 (code 4)
  EXPECT_EQ(moekit::e2m1_from_float(2.5f), 4u);    // tie 2 / 3 → 2
  EXPECT_EQ(moekit::e2m1_from_float(3.5f), 6u);    // tie 3 / 4 → 4 (code 6)
  EXPECT_EQ(moekit::e2m1_from_float(5.0f), 6u);    // tie 4 / 6 → 4
  EXPECT_EQ(moekit::e2m1_from_float(5.01f), 7u);
  EXPECT_EQ(moekit::e2m1_from_float(100.0f), 7u);  // saturates
  EXPECT_EQ(moekit::e2m1_from_float(-100.0f), 15u);
  EXPECT_EQ(moekit::e2m1_from_float(-0.7f), 9u);   // -0.5
  EXPECT_EQ(moekit::e2m1_from_float(-0.8f), 10u);  // -1
  EXPECT_EQ(moekit::e2m1_from_float(std::nanf("")), 0u);
}

TEST(Mxfp4, Ue8m0IsAPowerOfTwo) {
  EXPECT_EQ(moekit::ue8m0_to_double(127), 1.0);
  EXPECT_EQ(moekit::ue8m0_to_double(130), 8.0);
  EXPECT_EQ(moekit::ue8m0_to_double(0), std::ldexp(1.0, -127));
  EXPECT_EQ(moekit::ue8m0_to_double(254), std::ldexp(1.0, 127));
  EXPECT_TRUE(std::isnan(moekit::ue8m0_to_double(255)));
}

// The storage order gpt-oss's loader reads (gpt_oss/torch/weights.py): byte j of a 16-byte block
// holds element 2j in its low nibble and 2j + 1 in its high one; value = lut[code] · 2^(s − 127).
TEST(Mxfp4, DequantizationFollowsTheNibbleOrder) {
  std::vector<uint8_t> codes(32), scales(2);
  for (int j = 0; j < 32; ++j) codes[size_t(j)] = uint8_t((j % 16) | ((15 - j % 16) << 4));
  scales = {126, 130};  // 2^-1 for the first 32 elements, 2^3 for the next
  std::vector<double> out(64);
  moekit::dequantize_mxfp4(codes.data(), 32, scales.data(), 2, 1, 64, out.data(), 64);
  for (int j = 0; j < 64; ++j) {
    const uint8_t byte = codes[size_t(j / 2)];
    const uint8_t code = j % 2 == 0 ? uint8_t(byte & 15) : uint8_t(byte >> 4);
    EXPECT_EQ(out[size_t(j)], double(moekit::e2m1_to_float(code)) * (j < 32 ? 0.5 : 8.0)) << j;
  }
  EXPECT_EQ(out[0], 0.0);    // byte 0 = 0xF0: low nibble 0
  EXPECT_EQ(out[1], -3.0);   // high nibble 15 = -6, times 0.5
  EXPECT_EQ(out[2], 0.25);   // byte 1 = 0xE1: low nibble 1 = 0.5
}

TEST(Mxfp4, QuantizerFollowsOcp) {
  // A block whose values are E2M1 values times 2^-3 comes back exactly (amax 6 · 2^-3 → s = 124 + 2 ... ).
  std::vector<float> w(64);
  for (int j = 0; j < 64; ++j) w[size_t(j)] = moekit::e2m1_to_float(uint8_t(j % 16)) * 0.125f;
  w[5] = 6.0f * 0.125f;  // amax 0.75: floor(log2 0.75) = -1, s = -1 - 2 + 127 = 124 → scale 2^-3
  std::vector<uint8_t> codes(32), scales(2);
  moekit::quantize_mxfp4(w.data(), 1, 64, 64, codes.data(), 32, scales.data(), 2);
  EXPECT_EQ(scales[0], 124);
  std::vector<double> back(64);
  moekit::dequantize_mxfp4(codes.data(), 32, scales.data(), 2, 1, 64, back.data(), 64);
  for (int j = 0; j < 64; ++j) EXPECT_EQ(back[size_t(j)], double(w[size_t(j)])) << j;
  // amax 7: floor(log2 7) = 2, scale 2^0, 7 saturates to 6.
  std::vector<float> v(32, 1.0f);
  v[3] = 7.0f;
  moekit::quantize_mxfp4(v.data(), 1, 32, 32, codes.data(), 16, scales.data(), 1);
  EXPECT_EQ(scales[0], 127);
  EXPECT_EQ(moekit::e2m1_to_float(uint8_t(codes[1] >> 4)), 6.0f);
  // Zeros: the smallest scale; NaN: scale 255.
  std::vector<float> z(32, 0.0f);
  moekit::quantize_mxfp4(z.data(), 1, 32, 32, codes.data(), 16, scales.data(), 1);
  EXPECT_EQ(scales[0], 0);
  z[7] = std::nanf("");
  moekit::quantize_mxfp4(z.data(), 1, 32, 32, codes.data(), 16, scales.data(), 1);
  EXPECT_EQ(scales[0], 255);
}

TEST(Mxfp4, QuantizationErrorOfCheckpointLikeWeights) {
  const int64_t rows = 64, k = 2880;
  const std::vector<float> w = checkpoint_like(rows, k, 0.02f, 11);
  std::vector<uint8_t> codes(size_t(rows * k / 2)), scales(size_t(rows * k / 32));
  moekit::quantize_mxfp4(w.data(), rows, k, k, codes.data(), k / 2, scales.data(), k / 32);
  std::vector<double> back(size_t(rows * k));
  moekit::dequantize_mxfp4(codes.data(), k / 2, scales.data(), k / 32, rows, k, back.data(), k);
  // Each element is within half an E2M1 step of its block's scale: at most 1 · 2^(s − 127) (the
  // 4 → 6 gap) and at most 2 · 2^(s − 127) for saturated values in (6, 8) · 2^(s − 127).
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const double x = w[size_t(r * k + j)], y = back[size_t(r * k + j)];
      const double step = moekit::ue8m0_to_double(scales[size_t(r * (k / 32) + j / 32)]);
      ASSERT_LE(std::fabs(x - y), 2.0 * step) << r << "," << j;
      num += (x - y) * (x - y);
      den += x * x;
    }
  const double rel = std::sqrt(num / den);
  EXPECT_GT(rel, 0.05);  // 4-bit codes: a coarse format
  EXPECT_LT(rel, 0.15);
}

// The FP8 form equals the MXFP4 values exactly when each 128 x 128 block's scales span at most 15
// binades; beyond, the error stays below 2^(m − 143) (include/moekit/mxfp4.h).
TEST(Mxfp4, Fp8FormIsExactInsideTheWindow) {
  const int64_t rows = 200, k = 2880;  // partial last blocks along both N and K (2880 = 22.5 x 128)
  std::mt19937 rng(3);
  std::vector<uint8_t> codes(size_t(rows * k / 2)), scales(size_t(rows * k / 32));
  for (uint8_t& c : codes) c = uint8_t(rng());
  std::uniform_int_distribution<int> window(100, 114);  // 15 binades
  for (uint8_t& s : scales) s = uint8_t(window(rng));
  EXPECT_LE(moekit::mxfp4_max_block_span(scales.data(), k / 32, rows, k), 15);
  std::vector<uint8_t> q(size_t(rows * k));
  const int64_t kb = moekit::ceil_div(k, 128);
  std::vector<float> sb(size_t(moekit::ceil_div(rows, 128) * kb));
  moekit::mxfp4_to_fp8(codes.data(), k / 2, scales.data(), k / 32, rows, k, q.data(), k, sb.data());
  std::vector<double> exact(size_t(rows * k));
  moekit::dequantize_mxfp4(codes.data(), k / 2, scales.data(), k / 32, rows, k, exact.data(), k);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const double fp8 = double(moekit::e4m3_to_float(q[size_t(r * k + j)])) * double(sb[size_t(r / 128 * kb + j / 128)]);
      ASSERT_EQ(fp8, exact[size_t(r * k + j)]) << r << "," << j;
    }
  // The scale of a block is 2^(m − 133) for its largest byte m.
  int m = 0;
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t b = 0; b < 4; ++b) m = std::max(m, int(scales[size_t(r * (k / 32) + b)]));
  EXPECT_EQ(sb[0], std::ldexp(1.0f, m - 133));
}

TEST(Mxfp4, Fp8FormBeyondTheWindowLosesOnlyTinyValues) {
  const int64_t rows = 128, k = 128;
  std::mt19937 rng(5);
  std::vector<uint8_t> codes(size_t(rows * k / 2)), scales(size_t(rows * k / 32));
  for (uint8_t& c : codes) c = uint8_t(rng());
  std::uniform_int_distribution<int> wide(90, 130);  // 41 binades
  for (uint8_t& s : scales) s = uint8_t(wide(rng));
  scales[0] = 130;  // m = 130
  EXPECT_EQ(moekit::mxfp4_max_block_span(scales.data(), k / 32, rows, k), 41);
  std::vector<uint8_t> q(size_t(rows * k));
  float sb = 0;
  moekit::mxfp4_to_fp8(codes.data(), k / 2, scales.data(), k / 32, rows, k, q.data(), k, &sb);
  std::vector<double> exact(size_t(rows * k));
  moekit::dequantize_mxfp4(codes.data(), k / 2, scales.data(), k / 32, rows, k, exact.data(), k);
  const double bound = std::ldexp(1.0, 130 - 143);
  int inexact = 0;
  for (int64_t i = 0; i < rows * k; ++i) {
    const double fp8 = double(moekit::e4m3_to_float(q[size_t(i)])) * double(sb);
    const int s = scales[size_t(i / 32)];
    if (s >= 130 - 14) {
      ASSERT_EQ(fp8, exact[size_t(i)]) << i;  // inside the window: exact
    } else {
      ASSERT_LE(std::fabs(fp8 - exact[size_t(i)]), bound) << i;
      inexact += fp8 != exact[size_t(i)];
    }
  }
  EXPECT_GT(inexact, 0);  // the case exists in this data
}

TEST(Mxfp4, Fp8FormPropagatesNanScales) {
  std::vector<uint8_t> codes(64 * 64, 0x21), scales(128 * 4, 120), q(128 * 128);
  scales[130] = 255;  // row 32, second 32-block
  std::vector<float> sb(1);
  moekit::mxfp4_to_fp8(codes.data(), 64, scales.data(), 4, 128, 128, q.data(), 128, sb.data());
  EXPECT_TRUE(std::isnan(sb[0]));
}

// The expansion the kernels' weight loader will run (kernels/sm90/mxfp4_expand.cuh) against the
// host's E4M3 rounding of the same products, for every code and shift, including those below the
// exact window (subnormal rounding) and −0.
TEST(Mxfp4Expand, EveryCodeAndShiftMatchesTheE4m3Rounding) {
  for (int shift = -24; shift <= 6; ++shift) {
    const moekit::sm90::Mxfp4Table t = moekit::sm90::mxfp4_table(shift);
    for (unsigned code = 0; code < 16; ++code) {
      const uint8_t want = moekit::e4m3_from_float(std::ldexp(moekit::e2m1_to_float(uint8_t(code)), shift));
      unsigned lo = 0, hi = 0;
      moekit::sm90::mxfp4_expand8(moekit::sm90::mxfp4_loader_word(code * 0x11111111u), t, lo, hi);  // the code in all eight places
      EXPECT_EQ(lo, want * 0x01010101u) << "code " << code << " shift " << shift;
      EXPECT_EQ(hi, want * 0x01010101u) << "code " << code << " shift " << shift;
      if (shift >= moekit::kMxfp4MinShift)  // inside the window: exact
        EXPECT_EQ(moekit::e4m3_to_float(uint8_t(want)), std::ldexp(moekit::e2m1_to_float(uint8_t(code)), shift));
    }
  }
  EXPECT_EQ(moekit::sm90::mxfp4_shift(120, 130), -4);
  EXPECT_EQ(moekit::sm90::mxfp4_shift(0, 254), moekit::sm90::kMxfp4ZeroShift);
  EXPECT_EQ(moekit::sm90::mxfp4_shift(255, 130), 6);  // a NaN scale byte stays in the table's range
}

TEST(Mxfp4Expand, EightCodesKeepTheirStorageOrder) {
  std::mt19937 rng(13);
  for (int i = 0; i < 2000; ++i) {
    const unsigned packed = unsigned(rng());
    const int shift = int(rng() % 24) - 17;
    unsigned lo = 0, hi = 0;
    moekit::sm90::mxfp4_expand8(moekit::sm90::mxfp4_loader_word(packed), moekit::sm90::mxfp4_table(shift), lo, hi);
    for (unsigned e = 0; e < 8; ++e) {
      const uint8_t code = uint8_t((packed >> (4 * e)) & 15u);  // element e: byte e / 2, low nibble first
      const unsigned got = ((e < 4 ? lo : hi) >> (8 * (e % 4))) & 0xFFu;
      ASSERT_EQ(got, moekit::e4m3_from_float(std::ldexp(moekit::e2m1_to_float(code), shift))) << e;
    }
  }
}

// The prepared rows' word order: word q of a 32-block expands to the block's columns 4q … 4q + 3
// (low word) and 16 + 4q … (high word), a tensor-core A fragment's two registers of one row; and
// the row units' swizzle puts the words of eight consecutive rows (one per row, a warp's fragment
// load for one k32 step and quad position q) in 32 different banks while keeping units whole.
TEST(Mxfp4Expand, FragmentWordsHoldTheMmaFragmentColumns) {
  std::mt19937 rng(17);
  for (int i = 0; i < 500; ++i) {
    const unsigned v[4] = {unsigned(rng()), unsigned(rng()), unsigned(rng()), unsigned(rng())};
    const int shift = int(rng() % 20) - 13;
    const moekit::sm90::Mxfp4Table t = moekit::sm90::mxfp4_table(shift);
    for (unsigned q = 0; q < 4; ++q) {
      unsigned lo = 0, hi = 0;
      moekit::sm90::mxfp4_expand8(moekit::sm90::mxfp4_loader_word(moekit::sm90::mxfp4_fragment_word(v, q)), t, lo, hi);
      for (unsigned j = 0; j < 8; ++j) {
        const unsigned col = (j < 4 ? 4 * q : 16 + 4 * q) + j % 4;  // element of the block
        const uint8_t code = uint8_t((v[col / 8] >> (4 * (col % 8))) & 15u);
        const unsigned got = ((j < 4 ? lo : hi) >> (8 * (j % 4))) & 0xFFu;
        ASSERT_EQ(got, moekit::e4m3_from_float(std::ldexp(moekit::e2m1_to_float(code), shift))) << q << " " << j;
      }
    }
  }
  for (unsigned r0 = 0; r0 < 32; r0 += 8)
    for (unsigned s = 0; s < 4; ++s) {
      unsigned banks = 0;
      for (unsigned r = r0; r < r0 + 8; ++r)
        for (unsigned q = 0; q < 4; ++q) banks |= 1u << ((r * 64 + moekit::sm90::mxfp4_row_unit(r, s) * 16 + 4 * q) / 4 % 32);
      EXPECT_EQ(banks, 0xFFFFFFFFu) << r0 << " " << s;
      unsigned units = 0;
      for (unsigned b = 0; b < 4; ++b) units |= 1u << moekit::sm90::mxfp4_row_unit(r0 + 3, b);
      EXPECT_EQ(units, 0xFu) << "a permutation of the row's units";
    }
}

// Expanding a matrix 32-block by 32-block with mxfp4_shift reproduces the host's FP8 form bit for
// bit, also for scales far beyond the exact window.
// Expands 32-block b of row r (codes [rows, k/2]) with `shift`, four words of eight codes at a
// time as the loader will, and compares with the FP8 form q [rows, k].
bool expands_to(const std::vector<uint8_t>& codes, int64_t k, int64_t r, int64_t b, int shift,
                const std::vector<uint8_t>& q) {
  const moekit::sm90::Mxfp4Table t = moekit::sm90::mxfp4_table(shift);
  for (int64_t w = 0; w < 4; ++w) {
    const uint8_t* src = codes.data() + r * (k / 2) + b * 16 + w * 4;
    const unsigned packed = unsigned(src[0]) | unsigned(src[1]) << 8 | unsigned(src[2]) << 16 | unsigned(src[3]) << 24;
    unsigned lo = 0, hi = 0;
    moekit::sm90::mxfp4_expand8(moekit::sm90::mxfp4_loader_word(packed), t, lo, hi);
    for (int64_t e = 0; e < 8; ++e)
      if ((((e < 4 ? lo : hi) >> (8 * (e % 4))) & 0xFFu) != q[size_t(r * k + b * 32 + w * 8 + e)]) return false;
  }
  return true;
}

// Random codes [rows, k/2] and scale bytes [rows, k/32] in [lo, lo + span).
void random_mxfp4(int64_t rows, int64_t k, unsigned seed, unsigned lo, unsigned span, std::vector<uint8_t>& codes,
                  std::vector<uint8_t>& scales) {
  std::mt19937 rng(seed);
  codes.resize(size_t(rows * k / 2));
  scales.resize(size_t(rows * k / 32));
  for (uint8_t& c : codes) c = uint8_t(rng());
  for (uint8_t& s : scales) s = uint8_t(lo + rng() % span);
}

TEST(Mxfp4Expand, ReproducesTheFp8Form) {
  const int64_t rows = 256, k = 384;
  std::vector<uint8_t> codes, scales;
  random_mxfp4(rows, k, 17, 100, 40, codes, scales);
  std::vector<uint8_t> q(size_t(rows * k));
  std::vector<float> sb(size_t(2 * 3));
  moekit::mxfp4_to_fp8(codes.data(), k / 2, scales.data(), k / 32, rows, k, q.data(), k, sb.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < k / 32; ++b) {
      unsigned m = 0;  // the 128 x 128 block's largest scale byte
      for (int64_t rr = r / 128 * 128; rr < r / 128 * 128 + 128; ++rr)
        for (int64_t bb = b / 4 * 4; bb < b / 4 * 4 + 4; ++bb) m = std::max(m, unsigned(scales[size_t(rr * (k / 32) + bb)]));
      ASSERT_TRUE(expands_to(codes, k, r, b, moekit::sm90::mxfp4_shift(scales[size_t(r * (k / 32) + b)], m), q))
          << r << "," << b;
    }
}

// The loader's scales: expanding with mxfp4_shifts' shifts reproduces the FP8 form bit for bit.
TEST(Mxfp4Expand, ShiftsFeedTheExpansion) {
  const int64_t rows = 200, k = 2880;
  std::vector<uint8_t> codes, scales;
  random_mxfp4(rows, k, 23, 90, 45, codes, scales);
  scales[77] = 255;  // a NaN scale: its block's sb is NaN, its shift stays in range
  std::vector<uint8_t> q(size_t(rows * k));
  const size_t nsb = size_t(moekit::ceil_div(rows, 128) * moekit::ceil_div(k, 128));
  std::vector<float> sb_q(nsb), sb(nsb);
  moekit::mxfp4_to_fp8(codes.data(), k / 2, scales.data(), k / 32, rows, k, q.data(), k, sb_q.data());
  std::vector<int8_t> shifts(size_t(rows * k / 32));
  moekit::mxfp4_shifts(scales.data(), k / 32, rows, k, shifts.data(), k / 32, sb.data());
  for (size_t i = 0; i < nsb; ++i) {
    if (std::isnan(sb_q[i])) EXPECT_TRUE(std::isnan(sb[i])) << i;
    else EXPECT_EQ(sb[i], sb_q[i]) << i;
  }
  EXPECT_TRUE(std::isnan(sb[19]));  // scale 77: row 0, 32-block 77, so K block 19 of row block 0
  EXPECT_FALSE(std::isnan(sb[18]));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < k / 32; ++b) {
      const int shift = shifts[size_t(r * (k / 32) + b)];
      ASSERT_GE(shift, moekit::kMxfp4ZeroShift);
      ASSERT_LE(shift, moekit::kMxfp4MaxShift);
      ASSERT_TRUE(expands_to(codes, k, r, b, shift, q)) << r << "," << b;
    }
}

TEST(Mxfp4, GptOssW1RowsBecomeGateThenUp) {
  const int64_t inter = 5;
  EXPECT_EQ(moekit::gpt_oss_w1_source_row(0, inter), 0);
  EXPECT_EQ(moekit::gpt_oss_w1_source_row(4, inter), 8);
  EXPECT_EQ(moekit::gpt_oss_w1_source_row(5, inter), 1);
  EXPECT_EQ(moekit::gpt_oss_w1_source_row(9, inter), 9);
  // Three bytes per row; gpt-oss row r holds (r, r, r).
  std::vector<uint8_t> src(2 * inter * 3), dst(src.size());
  for (int64_t r = 0; r < 2 * inter; ++r)
    for (int b = 0; b < 3; ++b) src[size_t(r * 3 + b)] = uint8_t(r);
  moekit::gpt_oss_w1_to_moekit_rows(src.data(), inter, 3, dst.data());
  for (int64_t r = 0; r < 2 * inter; ++r) {
    const int64_t want = r < inter ? 2 * r : 2 * (r - inter) + 1;  // gate i = gpt-oss row 2i, up i = 2i + 1
    for (int b = 0; b < 3; ++b) EXPECT_EQ(dst[size_t(r * 3 + b)], want) << r;
  }
}

TEST(Mxfp4, RejectsBadArguments) {
  std::vector<uint8_t> codes(64), scales(4), q(128);
  std::vector<float> w(128), sb(1);
  std::vector<double> out(128);
  EXPECT_THROW(moekit::quantize_mxfp4(w.data(), 1, 48, 48, codes.data(), 24, scales.data(), 2), moekit::Error);
  EXPECT_THROW(moekit::quantize_mxfp4(w.data(), 1, 64, 64, codes.data(), 16, scales.data(), 2), moekit::Error);
  EXPECT_THROW(moekit::dequantize_mxfp4(codes.data(), 32, scales.data(), 1, 1, 64, out.data(), 64), moekit::Error);
  EXPECT_THROW(moekit::dequantize_mxfp4(nullptr, 32, scales.data(), 2, 1, 64, out.data(), 64), moekit::Error);
  EXPECT_THROW(moekit::mxfp4_to_fp8(codes.data(), 32, scales.data(), 2, 1, 64, q.data(), 32, sb.data()),
               moekit::Error);
  EXPECT_THROW(moekit::mxfp4_max_block_span(scales.data(), 1, 1, 64), moekit::Error);
  EXPECT_THROW(moekit::gpt_oss_w1_to_moekit_rows(codes.data(), 2, 4, codes.data()), moekit::Error);
  EXPECT_NO_THROW(moekit::dequantize_mxfp4(nullptr, 0, nullptr, 0, 0, 0, nullptr, 0));
}

}  // namespace
