// CPU tests of the float64 GEMM reference and the relative L2 error (include/moekit/numerics.h).

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
