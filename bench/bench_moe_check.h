// `moekit bench moe`'s correctness columns: the layer's y checked against the float64 SPEC §3
// reference (src/moe/moe_reference.h) on the checked rows, as rel_l2 / row_med / row_max.
#pragma once
#include <cstdint>
#include <vector>

#include "bench/moe_presets.h"
#include "runtime/device_buffer.h"

namespace moekit::bench {

/// Bounds of the layer's error on checkpoint-like data (bf16 N(0, 0.02²) weights quantized
/// 128x128, x ~ N(0, 1); docs/accuracy.md): over 16 or more checked rows, the overall relative L2
/// error and the median of the per-row relative L2 errors. Over fewer rows (T < 16) only the overall
/// error, bounded by kMoeMaxRelL2FewRows: one large h element one E4M3 step off moves a row by up to
/// ~1e-2. bench moe notes (and fails) a T above its bound.
inline constexpr double kMoeMaxRelL2 = 6e-3;
inline constexpr double kMoeMaxRowMedian = 4.5e-3;
inline constexpr double kMoeMaxRelL2FewRows = 1.5e-2;
inline constexpr int64_t kMoeManyRows = 16;

/// Rows checked against the reference for T > 64 (all rows for T ≤ 64).
inline constexpr int kMoeSampleRows = 16;

/// Rows compared with the reference: all for T ≤ 64, else kMoeSampleRows distinct rows (first,
/// last and random ones from `seed`), ascending.
std::vector<int64_t> check_rows(int64_t t, uint64_t seed);

/// The error of the checked rows against the reference.
///  rel_l2   ‖y − ref‖ / ‖ref‖ over all checked rows together
///  row_med, row_max  median / maximum over the checked rows of ‖y_r − ref_r‖ / ‖ref_r‖
/// Each is relative_l2_error (include/moekit/numerics.h): a NaN in a row makes that row's error
/// (and rel_l2) NaN, an infinity makes it inf; a NaN row counts as the largest in row_med and
/// row_max, so neither ever shows a small number for it.
struct MoeCheck {
  double rel_l2 = 0.0, row_med = 0.0, row_max = 0.0;
};

/// MoeCheck of `got` (n rows of h values) against `ref` (the same shape, float64).
MoeCheck moe_check_rows(const float* got, const double* ref, int64_t n, int64_t h);

/// MoeCheck of y (device bf16 [T, H]) rows `rows` against the float64 reference of preset `p` on
/// the routing ids / wts (device [T, k] int32 / fp32) and the weights w1, sw1, w2, sw2 (device,
/// SPEC layouts; fetched one expert at a time); gpt-oss presets: their activation and the FP32
/// biases b1 [E, 2I], b2 [E, H] (device).
MoeCheck moe_reference_check(const Preset& p, const detail::DeviceBuffer& x, const detail::DeviceBuffer& y,
                             const detail::DeviceBuffer& ids, const detail::DeviceBuffer& wts,
                             const std::vector<int64_t>& rows, const detail::DeviceBuffer& w1,
                             const detail::DeviceBuffer& sw1, const detail::DeviceBuffer& w2,
                             const detail::DeviceBuffer& sw2, const detail::DeviceBuffer* b1 = nullptr,
                             const detail::DeviceBuffer* b2 = nullptr);

/// ‖a − ref‖ / ‖ref‖ of two bf16 vectors of the same length (the baseline's base_diff).
double rel_l2_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& ref);

}  // namespace moekit::bench
