// moekit — host-side number formats, quantizers, scale layouts and the float64 reference
// (implementation of include/moekit/numerics.h; SPEC §1–2).
//
// Decisions every kernel must follow to match these functions bit for bit. All three scalar
// functions below were compared with an H100 over all 2^32 float inputs (cvt.rn.satfinite.
// e4m3x2.f32, cvt.rn.bf16.f32, and __fdiv_rn(fmaxf(amax, 1e-4f), 448.f)): zero differences.
//  * E4M3: round to nearest even on the exact float value, then saturate: every |x| ≥ 448
//    (including ±inf) becomes ±448 (0x7E / 0xFE). Every NaN becomes the canonical 0x7F, whatever
//    its sign: that is what cvt.rn.satfinite.e4m3x2.f32 returns (it drops the sign of a NaN), and
//    it keeps quantized NaNs independent of how the CPU or GPU division propagates a NaN's sign.
//  * BF16: round to nearest even; finite values that round past the largest bf16 become ±inf
//    (no saturation). Every NaN becomes the canonical quiet NaN 0x7FFF, as cvt.rn.bf16.f32 does.
//  * quant_scale: the floor is applied like fmaxf (NaN ignored, signalling NaN included), so a NaN
//    amax gets the floor scale 1e-4f / 448; amax = +inf gives s = +inf (with or without ue8m0).
//    The ue8m0 rounding is done on the bits (drop the mantissa, step the exponent). Kernels must
//    not use exp2f(ceilf(log2f(s))): on the H100 that differs for 3102 positive float amax values.
//  * Quantizers: the block amax is max |x| over the block's valid elements with NaN elements
//    ignored (a chain of fmaxf). NaN elements still quantize to the NaN code 0x7F. An inf element
//    makes the block's scale inf; then that element quantizes to NaN (inf / inf) and the block's
//    finite elements to ±0.
//  * No flush-to-zero anywhere: x / s is the IEEE division with subnormals kept.
#include "moekit/numerics.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "common/check.h"

namespace moekit {
namespace {

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32ExpMask = 0x7F800000u;
constexpr uint32_t kF32MantMask = 0x007FFFFFu;
constexpr uint32_t kF32Inf = 0x7F800000u;
// Bits of 448.0f, the largest finite E4M3 value (2^8 * 1.75).
constexpr uint32_t kF32E4M3Max = 0x43E00000u;
// Bits of 2^-6 = 0.015625f, the smallest normal E4M3 value.
constexpr uint32_t kF32E4M3MinNormal = 0x3C800000u;

constexpr uint8_t kE4M3MaxFinite = 0x7E;
constexpr uint8_t kE4M3NaN = 0x7F;
constexpr uint16_t kBF16NaN = 0x7FFF;

// Shifts `v` right by `s` bits (1 ≤ s ≤ 31), rounding to nearest with ties to even.
inline uint32_t shift_right_rne(uint32_t v, uint32_t s) {
  const uint32_t q = v >> s;
  const uint32_t rem = v & ((1u << s) - 1u);
  const uint32_t half = 1u << (s - 1u);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

// Rounds a positive float up to a power of two (exact powers of two and +inf are kept).
inline float round_up_pow2(float s) {
  uint32_t b = std::bit_cast<uint32_t>(s);
  const uint32_t exp = b & kF32ExpMask;
  const uint32_t mant = b & kF32MantMask;
  if (exp == kF32ExpMask || mant == 0) return s;  // inf, NaN, zero or an exact power of two
  if (exp != 0) {
    // Normal: drop the mantissa and step the exponent once. Overflow lands on +inf (0x7F800000).
    b = exp + 0x00800000u;
  } else {
    // Subnormal (unreachable with the 1e-4 floor, kept for completeness): the next power of two
    // of the mantissa field, possibly the smallest normal 0x00800000.
    const uint32_t top = std::bit_floor(mant);
    b = (top == mant) ? mant : top << 1;
  }
  return std::bit_cast<float>(b);
}

// Absolute maximum that ignores NaN (the order of fmaxf chains does not matter for the result).
inline float amax_step(float amax, float x) {
  const float a = std::fabs(x);
  return a > amax ? a : amax;  // NaN compares false: ignored
}

void check_nonneg(int64_t v, const char* fn, const char* name) {
  MOEKIT_REQUIRE(v >= 0, ErrorCode::kInvalidArgument, fn, ": ", name, " must be >= 0 (got ", v, ")");
}

// E4M3 decode table (all 256 codes), built once.
struct E4M3Table {
  float v[256];
  E4M3Table() {
    for (int i = 0; i < 256; ++i) v[i] = e4m3_to_float(static_cast<uint8_t>(i));
  }
};
const E4M3Table& e4m3_table() {
  static const E4M3Table t;
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Scalar formats
// ---------------------------------------------------------------------------------------------

uint8_t e4m3_from_float(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & kF32AbsMask;
  if (a > kF32Inf) return kE4M3NaN;                      // NaN: canonical 0x7F, sign dropped
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (a >= kF32E4M3Max) return sign | kE4M3MaxFinite;    // |x| ≥ 448 or inf: satfinite
  if (a >= kF32E4M3MinNormal) {
    // Normal E4M3 range. Rebias the exponent (127 → 7) and round the 23-bit mantissa to 3 bits.
    // A mantissa carry moves into the exponent field, which is the correct next binade; since
    // a < 448 the result is at most 0x7E (448 itself).
    const uint32_t rebiased = a - ((127u - 7u) << 23);
    return sign | static_cast<uint8_t>(shift_right_rne(rebiased, 20));
  }
  // Subnormal E4M3 range (|x| < 2^-6): code = round(|x| * 2^9), 0..8 (8 is 2^-6, code 0x08).
  const uint32_t fexp = a >> 23;  // biased float exponent, 0..120 here
  if (fexp < 127 - 11) return sign;  // |x| < 2^-11 < half of 2^-9: rounds to ±0
  // |x| = sig * 2^(fexp - 150) (fexp ≥ 116, so x is a normal float); |x| * 2^9 = sig >> (141 - fexp)
  const uint32_t sig = (a & kF32MantMask) | 0x00800000u;
  const uint32_t shift = 141u - fexp;  // 21..25
  return sign | static_cast<uint8_t>(shift_right_rne(sig, shift));
}

float e4m3_to_float(uint8_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24;
  const uint32_t exp = (bits >> 3) & 0xFu;
  const uint32_t mant = bits & 0x7u;
  if (exp == 0xFu && mant == 0x7u) return std::bit_cast<float>(sign | 0x7FC00000u);  // NaN
  if (exp == 0) {
    // Subnormal: mant * 2^-9, exact in float.
    const float mag = static_cast<float>(mant) * 0x1p-9f;
    return sign ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((exp + 127u - 7u) << 23) | (mant << 20));
}

uint16_t bf16_from_float(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & kF32AbsMask) > kF32Inf) return kBF16NaN;  // canonical quiet NaN
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);  // RNE; may carry into inf
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

float quant_scale(float amax, bool ue8m0) {
  // fmaxf semantics: a NaN amax (quiet or signalling) gets the floor. std::fmax is not used:
  // glibc returns NaN for a signalling NaN operand.
  const float floored = amax > 1e-4f ? amax : 1e-4f;
  const float s = floored / 448.0f;
  return ue8m0 ? round_up_pow2(s) : s;
}

// ---------------------------------------------------------------------------------------------
// Quantizers
// ---------------------------------------------------------------------------------------------

void quantize_1x128(const float* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q, int64_t ldq,
                    float* scales, bool ue8m0) {
  static constexpr const char* fn = "quantize_1x128";
  check_nonneg(m, fn, "m");
  check_nonneg(k, fn, "k");
  MOEKIT_REQUIRE(ldx >= k, ErrorCode::kInvalidArgument, fn, ": ldx (", ldx, ") < k (", k, ")");
  MOEKIT_REQUIRE(ldq >= k, ErrorCode::kInvalidArgument, fn, ": ldq (", ldq, ") < k (", k, ")");
  if (m == 0 || k == 0) return;
  MOEKIT_REQUIRE(x && q && scales, ErrorCode::kInvalidArgument, fn, ": null pointer");
  const int64_t nkb = ceil_div(k, kQuantBlock);
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * ldx;
    uint8_t* qr = q + i * ldq;
    for (int64_t kb = 0; kb < nkb; ++kb) {
      const int64_t k0 = kb * kQuantBlock;
      const int64_t k1 = std::min(k, k0 + kQuantBlock);
      float amax = 0.0f;
      for (int64_t c = k0; c < k1; ++c) amax = amax_step(amax, xr[c]);
      const float s = quant_scale(amax, ue8m0);
      for (int64_t c = k0; c < k1; ++c) qr[c] = e4m3_from_float(xr[c] / s);
      scales[i * nkb + kb] = s;
    }
  }
}

void quantize_128x128(const float* w, int64_t n, int64_t k, int64_t ldw, uint8_t* q, int64_t ldq,
                      float* scales, bool ue8m0) {
  static constexpr const char* fn = "quantize_128x128";
  check_nonneg(n, fn, "n");
  check_nonneg(k, fn, "k");
  MOEKIT_REQUIRE(ldw >= k, ErrorCode::kInvalidArgument, fn, ": ldw (", ldw, ") < k (", k, ")");
  MOEKIT_REQUIRE(ldq >= k, ErrorCode::kInvalidArgument, fn, ": ldq (", ldq, ") < k (", k, ")");
  if (n == 0 || k == 0) return;
  MOEKIT_REQUIRE(w && q && scales, ErrorCode::kInvalidArgument, fn, ": null pointer");
  const int64_t nnb = ceil_div(n, kQuantBlock);
  const int64_t nkb = ceil_div(k, kQuantBlock);
  for (int64_t nb = 0; nb < nnb; ++nb) {
    const int64_t r0 = nb * kQuantBlock;
    const int64_t r1 = std::min(n, r0 + kQuantBlock);
    for (int64_t kb = 0; kb < nkb; ++kb) {
      const int64_t k0 = kb * kQuantBlock;
      const int64_t k1 = std::min(k, k0 + kQuantBlock);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = k0; c < k1; ++c) amax = amax_step(amax, w[r * ldw + c]);
      const float s = quant_scale(amax, ue8m0);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = k0; c < k1; ++c) q[r * ldq + c] = e4m3_from_float(w[r * ldw + c] / s);
      scales[nb * nkb + kb] = s;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Activation-scale layouts
// ---------------------------------------------------------------------------------------------

void sfa_logical_to_physical(const float* logical, int64_t m, int64_t k, float* physical) {
  static constexpr const char* fn = "sfa_logical_to_physical";
  check_nonneg(m, fn, "m");
  check_nonneg(k, fn, "k");
  const int64_t nkb = ceil_div(k, kQuantBlock);
  const int64_t ld = sfa_ld(m);
  if (nkb == 0 || ld == 0) return;
  MOEKIT_REQUIRE(logical && physical, ErrorCode::kInvalidArgument, fn, ": null pointer");
  for (int64_t kb = 0; kb < nkb; ++kb) {
    float* col = physical + kb * ld;
    for (int64_t r = 0; r < m; ++r) col[r] = logical[r * nkb + kb];
    for (int64_t r = m; r < ld; ++r) col[r] = 0.0f;
  }
}

void sfa_physical_to_logical(const float* physical, int64_t m, int64_t k, float* logical) {
  static constexpr const char* fn = "sfa_physical_to_logical";
  check_nonneg(m, fn, "m");
  check_nonneg(k, fn, "k");
  const int64_t nkb = ceil_div(k, kQuantBlock);
  const int64_t ld = sfa_ld(m);
  if (nkb == 0 || m == 0) return;
  MOEKIT_REQUIRE(logical && physical, ErrorCode::kInvalidArgument, fn, ": null pointer");
  for (int64_t r = 0; r < m; ++r)
    for (int64_t kb = 0; kb < nkb; ++kb) logical[r * nkb + kb] = physical[kb * ld + r];
}

// ---------------------------------------------------------------------------------------------
// Reference GEMM
// ---------------------------------------------------------------------------------------------
//
// Exactness argument (why the summation order inside a K block does not matter): every E4M3
// value is an integer multiple of 2^-9 with magnitude ≤ 448 < 2^9, so every product of two is a
// multiple of 2^-18 below 2^18, exact in float, and every partial sum of ≤ 128 of them is a
// multiple of 2^-18 below 2^25, i.e. fits in 43 bits: exact in double. The only roundings are
// then term = (double(sa) * double(sb)) * inner (sa·sb is exact in double, so one rounding) and
// the float64 sum of the terms in increasing kb order. Each d[i, j] is computed by one thread
// in that fixed order, so the result does not depend on the thread count or the tiling.

namespace {

constexpr int64_t kTileM = 32;  // rows of A per work item
constexpr int64_t kTileN = 64;  // rows of B per work item (divides 128: one sb row per tile)

// Exact dot product of two 128-float slices of dequantized E4M3 values (zero padded).
inline double block_dot(const float* a, const float* b) {
  // Independent accumulators let the compiler vectorize; exactness makes the order irrelevant.
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t c = 0; c < kQuantBlock; c += 8) {
    for (int u = 0; u < 8; ++u) acc[u] += static_cast<double>(a[c + u] * b[c + u]);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

struct GemmArgs {
  const uint8_t* qa;
  int64_t lda;
  const float* sa;
  const uint8_t* qb;
  int64_t ldb;
  const float* sb;
  int64_t m, n, k;
  double* d;
};

// Computes the output tile rows [i0, i1) x cols [j0, j1). Buffers are per thread.
void gemm_tile(const GemmArgs& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, std::vector<float>& abuf,
               std::vector<float>& bbuf, std::vector<double>& acc) {
  const float* lut = e4m3_table().v;
  const int64_t nkb = ceil_div(g.k, kQuantBlock);
  const int64_t tm = i1 - i0;
  const int64_t tn = j1 - j0;
  std::fill(acc.begin(), acc.begin() + tm * tn, 0.0);
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const int64_t k0 = kb * kQuantBlock;
    const int64_t kl = std::min(kQuantBlock, g.k - k0);
    // Dequantize this K block of the tile's A and B rows (zero padded to 128).
    for (int64_t i = 0; i < tm; ++i) {
      const uint8_t* src = g.qa + (i0 + i) * g.lda + k0;
      float* dst = abuf.data() + i * kQuantBlock;
      for (int64_t c = 0; c < kl; ++c) dst[c] = lut[src[c]];
      for (int64_t c = kl; c < kQuantBlock; ++c) dst[c] = 0.0f;
    }
    for (int64_t j = 0; j < tn; ++j) {
      const uint8_t* src = g.qb + (j0 + j) * g.ldb + k0;
      float* dst = bbuf.data() + j * kQuantBlock;
      for (int64_t c = 0; c < kl; ++c) dst[c] = lut[src[c]];
      for (int64_t c = kl; c < kQuantBlock; ++c) dst[c] = 0.0f;
    }
    for (int64_t i = 0; i < tm; ++i) {
      const double sa = static_cast<double>(g.sa[(i0 + i) * nkb + kb]);
      const float* arow = abuf.data() + i * kQuantBlock;
      double* accr = acc.data() + i * tn;
      for (int64_t j = 0; j < tn; ++j) {
        const double sb = static_cast<double>(g.sb[((j0 + j) / kQuantBlock) * nkb + kb]);
        const double inner = block_dot(arow, bbuf.data() + j * kQuantBlock);
        accr[j] += (sa * sb) * inner;
      }
    }
  }
  for (int64_t i = 0; i < tm; ++i)
    std::copy(acc.begin() + i * tn, acc.begin() + (i + 1) * tn, g.d + (i0 + i) * g.n + j0);
}

}  // namespace

void gemm_reference(const uint8_t* qa, int64_t lda, const float* sa, const uint8_t* qb, int64_t ldb,
                    const float* sb, int64_t m, int64_t n, int64_t k, double* d) {
  static constexpr const char* fn = "gemm_reference";
  check_nonneg(m, fn, "m");
  check_nonneg(n, fn, "n");
  check_nonneg(k, fn, "k");
  MOEKIT_REQUIRE(lda >= k, ErrorCode::kInvalidArgument, fn, ": lda (", lda, ") < k (", k, ")");
  MOEKIT_REQUIRE(ldb >= k, ErrorCode::kInvalidArgument, fn, ": ldb (", ldb, ") < k (", k, ")");
  if (m == 0 || n == 0) return;
  MOEKIT_REQUIRE(d != nullptr, ErrorCode::kInvalidArgument, fn, ": null output");
  if (k == 0) {
    std::fill(d, d + m * n, 0.0);
    return;
  }
  MOEKIT_REQUIRE(qa && sa && qb && sb, ErrorCode::kInvalidArgument, fn, ": null pointer");
  (void)e4m3_table();  // build the table before any thread reads it

  const GemmArgs g{qa, lda, sa, qb, ldb, sb, m, n, k, d};
  const int64_t tiles_m = ceil_div(m, kTileM);
  const int64_t tiles_n = ceil_div(n, kTileN);
  const int64_t tiles = tiles_m * tiles_n;
  // Each thread takes whole tiles from a shared counter; every output element is written by
  // exactly one tile, so scheduling cannot change any value.
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    std::vector<float> abuf(kTileM * kQuantBlock);
    std::vector<float> bbuf(kTileN * kQuantBlock);
    std::vector<double> acc(kTileM * kTileN);
    for (int64_t t = next.fetch_add(1); t < tiles; t = next.fetch_add(1)) {
      const int64_t tm = t / tiles_n;
      const int64_t tn = t % tiles_n;
      const int64_t i0 = tm * kTileM;
      const int64_t j0 = tn * kTileN;
      gemm_tile(g, i0, std::min(m, i0 + kTileM), j0, std::min(n, j0 + kTileN), abuf, bbuf, acc);
    }
  };

  // Small problems are not worth the thread start-up.
  const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  int64_t nthreads = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  nthreads = std::min(nthreads, tiles);
  if (work < 4.0e6) nthreads = 1;
  if (nthreads == 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(nthreads - 1));
  for (int64_t t = 1; t < nthreads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

// ---------------------------------------------------------------------------------------------
// Error metric
// ---------------------------------------------------------------------------------------------

double relative_l2_error(const float* out, const double* ref, size_t n) {
  // Semantics beyond the header: an element where out and ref are the same infinity counts as an
  // exact match (difference 0); any other infinity follows IEEE arithmetic on the two norms
  // (‖diff‖ = inf over a finite ‖ref‖ gives inf, inf / inf gives NaN, finite / inf gives 0).
  // n == 0 gives 0.
  if (n == 0) return 0.0;
  MOEKIT_REQUIRE(out && ref, ErrorCode::kInvalidArgument, "relative_l2_error: null pointer");
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  auto diff_at = [&](size_t i) {
    const double o = static_cast<double>(out[i]);
    return o == ref[i] ? 0.0 : o - ref[i];
  };
  auto ref_at = [&](size_t i) { return ref[i]; };
  double max_diff = 0.0;
  double max_ref = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(out[i]) || std::isnan(ref[i])) return kNaN;
    max_diff = std::max(max_diff, std::fabs(diff_at(i)));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  // Each norm is computed with its terms scaled by a power of two near its largest term, so
  // squares of very large or very small values neither overflow nor underflow. The scale is
  // applied as two factors so that it stays representable even for subnormal maxima.
  auto scaled_norm = [&](double maxv, auto term) -> double {
    if (maxv == 0.0) return 0.0;
    if (std::isinf(maxv)) return std::numeric_limits<double>::infinity();
    int e = 0;
    std::frexp(maxv, &e);  // maxv < 2^e
    const double s1 = std::ldexp(1.0, -(e / 2));
    const double s2 = std::ldexp(1.0, -(e - e / 2));
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double t = (term(i) * s1) * s2;  // |t| < 1
      sum += t * t;
    }
    return std::ldexp(std::sqrt(sum), e);
  };
  const double diff_norm = scaled_norm(max_diff, diff_at);
  const double ref_norm = scaled_norm(max_ref, ref_at);
  if (ref_norm == 0.0) return diff_norm;
  return diff_norm / ref_norm;
}

}  // namespace moekit
