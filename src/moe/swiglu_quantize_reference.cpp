// moekit — host reference of swiglu_quantize (include/moekit/moe_ops.h, SPEC §3).
//
// h is computed in float with the very operations of the device kernel (moe/swiglu_quantize.cu):
//   g' = limit > 0 ? (g > limit ? limit : g) : g                       (upper clamp only)
//   u' = limit > 0 ? (u > limit ? limit : (u < -limit ? -limit : u)) : u   (both sides)
//   h  = (g' / (1.0f + std::exp(-g'))) * u'                               (float exp, IEEE ops)
// The clamps are comparisons, so a NaN g or u passes through and makes that element's h NaN.
// Only std::exp (glibc expf) vs CUDA expf may round differently (by an ulp). h is then quantized by
// quantize_1x128 (logical scales [rows, ceil(I/128)], NaN ignored by the amax, NaN → 0x7F).
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/check.h"
#include "moekit/moe_ops.h"
#include "moekit/numerics.h"

namespace moekit {

void swiglu_quantize_reference(const float* gu, int64_t rows, int64_t inter, float limit, uint8_t* hq,
                               float* scales_logical, bool ue8m0) {
  static constexpr const char* fn = "moekit::swiglu_quantize_reference";
  MOEKIT_REQUIRE(rows >= 0, ErrorCode::kInvalidArgument, fn, ": rows = ", rows, " must be >= 0");
  MOEKIT_REQUIRE(inter >= 0, ErrorCode::kInvalidArgument, fn, ": inter = ", inter, " must be >= 0");
  MOEKIT_REQUIRE(!std::isnan(limit), ErrorCode::kInvalidArgument, fn,
                 ": limit is NaN (use a value <= 0 to disable the clamp)");
  if (rows == 0 || inter == 0) return;
  MOEKIT_REQUIRE(gu && hq && scales_logical, ErrorCode::kInvalidArgument, fn, ": null pointer");

  const bool clamp = limit > 0.0f;
  std::vector<float> h(static_cast<size_t>(rows * inter));
  for (int64_t r = 0; r < rows; ++r) {
    const float* gr = gu + r * 2 * inter;
    const float* ur = gr + inter;
    float* hr = h.data() + r * inter;
    for (int64_t c = 0; c < inter; ++c) {
      float g = gr[c];
      float u = ur[c];
      if (clamp) {
        g = g > limit ? limit : g;
        u = u > limit ? limit : (u < -limit ? -limit : u);
      }
      const float den = 1.0f + std::exp(-g);
      const float silu = g / den;
      hr[c] = silu * u;
    }
  }
  quantize_1x128(h.data(), rows, inter, inter, hq, inter, scales_logical, ue8m0);
}

}  // namespace moekit
