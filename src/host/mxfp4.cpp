// MXFP4 on the host (include/moekit/mxfp4.h).
#include "moekit/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/check.h"
#include "kernels/sm90/mxfp4_expand.cuh"
#include "moekit/numerics.h"

namespace moekit {

static_assert(kMxfp4ZeroShift == sm90::kMxfp4ZeroShift && kMxfp4MaxShift == 6,
              "the public MXFP4 shift limits are the expansion's (kernels/sm90/mxfp4_expand.cuh)");

namespace {

constexpr float kE2m1Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

void require_layout(int64_t rows, int64_t k, int64_t ldc, int64_t lds, const void* codes, const void* scales,
                    const char* fn) {
  MOEKIT_REQUIRE(rows >= 0 && k >= 0, ErrorCode::kInvalidArgument, "moekit::", fn, ": negative shape ", rows, " x ",
                 k);
  MOEKIT_REQUIRE(k % kMxfp4Block == 0, ErrorCode::kInvalidArgument, "moekit::", fn, ": k = ", k,
                 " is not a multiple of ", kMxfp4Block, " (MXFP4 scales one block of 32 along K)");
  MOEKIT_REQUIRE(ldc >= k / 2 && lds >= k / kMxfp4Block, ErrorCode::kInvalidArgument, "moekit::", fn,
                 ": row strides ldc = ", ldc, " (need >= ", k / 2, " bytes), lds = ", lds, " (need >= ",
                 k / kMxfp4Block, ")");
  MOEKIT_REQUIRE(rows * k == 0 || (codes != nullptr && scales != nullptr), ErrorCode::kInvalidArgument, "moekit::",
                 fn, ": null codes or scales");
}

uint8_t code_at(const uint8_t* codes, int64_t ldc, int64_t r, int64_t j) {
  const uint8_t byte = codes[r * ldc + j / 2];
  return (j % 2 == 0) ? uint8_t(byte & 0x0F) : uint8_t(byte >> 4);  // the low nibble is the even element
}

}  // namespace

float e2m1_to_float(uint8_t code) {
  const float m = kE2m1Magnitudes[code & 7u];
  return (code & 8u) ? -m : m;
}

uint8_t e2m1_from_float(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 8u : 0u;
  const float a = std::fabs(x);
  uint8_t best = 0;
  for (uint8_t c = 1; c < 8; ++c) {
    const float d = std::fabs(a - kE2m1Magnitudes[c]), db = std::fabs(a - kE2m1Magnitudes[best]);
    // Nearest; a tie goes to the even code (mantissa bit 0).
    if (d < db || (d == db && (c & 1u) == 0)) best = c;
  }
  return uint8_t(sign | best);
}

double ue8m0_to_double(uint8_t s) {
  if (s == 255) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, int(s) - 127);
}

void quantize_mxfp4(const float* w, int64_t rows, int64_t k, int64_t ldw, uint8_t* codes, int64_t ldc,
                    uint8_t* scales, int64_t lds) {
  require_layout(rows, k, ldc, lds, codes, scales, "quantize_mxfp4");
  MOEKIT_REQUIRE(ldw >= k && (rows * k == 0 || w != nullptr), ErrorCode::kInvalidArgument,
                 "moekit::quantize_mxfp4: ldw = ", ldw, " < k = ", k, " or null w");
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < k / kMxfp4Block; ++b) {
      const float* x = w + r * ldw + b * kMxfp4Block;
      float amax = 0.0f;
      bool finite = true;
      for (int64_t j = 0; j < kMxfp4Block; ++j) {
        finite = finite && std::isfinite(x[j]);
        amax = std::max(amax, std::fabs(x[j]));
      }
      int s = 0;
      if (!finite) s = 255;
      else if (amax > 0.0f) s = std::clamp(int(std::floor(std::log2(double(amax)))) - 2 + 127, 0, 254);
      scales[r * lds + b] = uint8_t(s);
      const double inv = s == 255 ? 0.0 : std::ldexp(1.0, 127 - s);
      for (int64_t j = 0; j < kMxfp4Block; j += 2) {
        const uint8_t lo = e2m1_from_float(float(double(x[j]) * inv));
        const uint8_t hi = e2m1_from_float(float(double(x[j + 1]) * inv));
        codes[r * ldc + (b * kMxfp4Block + j) / 2] = uint8_t(lo | (hi << 4));
      }
    }
  }
}

void dequantize_mxfp4(const uint8_t* codes, int64_t ldc, const uint8_t* scales, int64_t lds, int64_t rows,
                      int64_t k, double* out, int64_t ldo) {
  require_layout(rows, k, ldc, lds, codes, scales, "dequantize_mxfp4");
  MOEKIT_REQUIRE(ldo >= k && (rows * k == 0 || out != nullptr), ErrorCode::kInvalidArgument,
                 "moekit::dequantize_mxfp4: ldo = ", ldo, " < k = ", k, " or null out");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      out[r * ldo + j] =
          double(e2m1_to_float(code_at(codes, ldc, r, j))) * ue8m0_to_double(scales[r * lds + j / kMxfp4Block]);
}

void mxfp4_shifts(const uint8_t* scales, int64_t lds, int64_t rows, int64_t k, int8_t* shifts, int64_t ldsh,
                  float* sb) {
  MOEKIT_REQUIRE(rows >= 0 && k >= 0 && k % kMxfp4Block == 0 && lds >= k / kMxfp4Block && ldsh >= k / kMxfp4Block &&
                     (rows * k == 0 || (scales != nullptr && shifts != nullptr && sb != nullptr)),
                 ErrorCode::kInvalidArgument, "moekit::mxfp4_shifts: bad shape ", rows, " x ", k, ", lds ", lds,
                 ", ldsh ", ldsh, " or null pointers");
  const int64_t kb_count = ceil_div(k, kQuantBlock);
  for (int64_t nb = 0; nb < ceil_div(rows, kQuantBlock); ++nb) {
    const int64_t r0 = nb * kQuantBlock, r1 = std::min(rows, r0 + kQuantBlock);
    for (int64_t kb = 0; kb < kb_count; ++kb) {
      const int64_t b0 = kb * kQuantBlock / kMxfp4Block, b1 = std::min(k, (kb + 1) * kQuantBlock) / kMxfp4Block;
      int m = 0;
      bool nan = false;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t b = b0; b < b1; ++b) {
          const int s = scales[r * lds + b];
          nan = nan || s == 255;
          if (s != 255) m = std::max(m, s);
        }
      sb[nb * kb_count + kb] = nan ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, m - 133);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t b = b0; b < b1; ++b)
          shifts[r * ldsh + b] = int8_t(sm90::mxfp4_shift(scales[r * lds + b], unsigned(m)));
    }
  }
}

void mxfp4_to_fp8(const uint8_t* codes, int64_t ldc, const uint8_t* scales, int64_t lds, int64_t rows, int64_t k,
                  uint8_t* q, int64_t ldq, float* sb) {
  require_layout(rows, k, ldc, lds, codes, scales, "mxfp4_to_fp8");
  MOEKIT_REQUIRE(ldq >= k && (rows * k == 0 || (q != nullptr && sb != nullptr)), ErrorCode::kInvalidArgument,
                 "moekit::mxfp4_to_fp8: ldq = ", ldq, " < k = ", k, " or null q / sb");
  std::vector<int8_t> shifts(size_t(rows * (k / kMxfp4Block)));
  mxfp4_shifts(scales, lds, rows, k, shifts.data(), k / kMxfp4Block, sb);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) {
      // e2m1 · 2^shift is exact in FP32; E4M3 rounds it (RNE) below 2^-9. The clamp at
      // kMxfp4ZeroShift changes nothing: such values round to zero either way.
      const int shift = shifts[size_t(r * (k / kMxfp4Block) + j / kMxfp4Block)];
      q[r * ldq + j] = e4m3_from_float(std::ldexp(e2m1_to_float(code_at(codes, ldc, r, j)), shift));
    }
}

int mxfp4_max_block_span(const uint8_t* scales, int64_t lds, int64_t rows, int64_t k) {
  MOEKIT_REQUIRE(rows >= 0 && k >= 0 && k % kMxfp4Block == 0 && lds >= k / kMxfp4Block &&
                     (rows * k == 0 || scales != nullptr),
                 ErrorCode::kInvalidArgument, "moekit::mxfp4_max_block_span: bad shape ", rows, " x ", k,
                 " or lds ", lds);
  int span = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += kQuantBlock)
    for (int64_t c0 = 0; c0 < k; c0 += kQuantBlock) {
      int lo = 255, hi = -1;
      for (int64_t r = r0; r < std::min(rows, r0 + kQuantBlock); ++r)
        for (int64_t b = c0 / kMxfp4Block; b < std::min(k, c0 + kQuantBlock) / kMxfp4Block; ++b) {
          const int s = scales[r * lds + b];
          if (s == 255) continue;
          lo = std::min(lo, s);
          hi = std::max(hi, s);
        }
      if (hi >= 0) span = std::max(span, hi - lo + 1);
    }
  return span;
}

void gpt_oss_w1_to_moekit_rows(const void* src, int64_t inter, int64_t row_bytes, void* dst) {
  MOEKIT_REQUIRE(inter >= 0 && row_bytes >= 0 && (inter * row_bytes == 0 || (src != nullptr && dst != nullptr)),
                 ErrorCode::kInvalidArgument, "moekit::gpt_oss_w1_to_moekit_rows: bad arguments (inter ", inter,
                 ", row_bytes ", row_bytes, ")");
  MOEKIT_REQUIRE(src != dst || inter * row_bytes == 0, ErrorCode::kInvalidArgument,
                 "moekit::gpt_oss_w1_to_moekit_rows: src and dst must not alias");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t row = 0; row < 2 * inter; ++row)
    std::memcpy(d + row * row_bytes, s + gpt_oss_w1_source_row(row, inter) * row_bytes, size_t(row_bytes));
}

}  // namespace moekit
