// MXFP4 expert weights on the host (OCP MX, ../shared/SPEC.md §6): the element and scale codes,
// a quantizer, the exact dequantization, the FP8 form the tensor cores will see, and the row order
// of gpt-oss's checkpoints. docs/design.md §MXFP4 weights explains the FP8 form.
//
// Storage (as gpt-oss's checkpoints): codes [rows, k/2] bytes, two E2M1 elements per byte along K,
// the low nibble the even element; scales [rows, k/32] bytes, one UE8M0 exponent per 32 consecutive
// elements along K, value 2^(s − 127). gpt-oss's `*_blocks` tensor [E, N, K/32, 16] is the codes
// tensor [E, N, K/2] and its `*_scales` [E, N, K/32] the scales.
#pragma once
#include <cstdint>

namespace moekit {

/// Elements per UE8M0 scale along K.
inline constexpr int64_t kMxfp4Block = 32;
/// The FP8 form holds E2M1 · 2^j exactly in E4M3 for j in [kMxfp4MinShift, kMxfp4MaxShift]: 15
/// binades (4 · 2^7 > 448; 0.5 · 2^−9 is below E4M3's smallest subnormal).
inline constexpr int kMxfp4MinShift = -8;
inline constexpr int kMxfp4MaxShift = 6;
/// Shifts at or below this make every element zero in E4M3 (6 · 2^−13 < 2^−10, half the smallest
/// subnormal).
inline constexpr int kMxfp4ZeroShift = -13;

/// E2M1 code (its low 4 bits; bit 3 the sign) → value, exact: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
/// Code 8 is −0.
float e2m1_to_float(uint8_t code);
/// Value → E2M1 code: round to nearest, ties to the even code (the one with mantissa bit 0);
/// magnitudes above 6 saturate to ±6; NaN → +0 (E2M1 has no NaN).
uint8_t e2m1_from_float(float x);
/// UE8M0 byte → 2^(s − 127), exact. s = 255 is NaN in OCP MX and returns NaN.
double ue8m0_to_double(uint8_t s);

/// OCP MX quantization of w[rows, k] (row stride ldw floats), k a multiple of 32. Per block of 32
/// along K with absolute maximum amax: s = clamp(floor(log2(amax)) − 2 + 127, 0, 254) (amax 0 or
/// not finite: s = 127 for 0, 255 for NaN/inf), elements e2m1_from_float(x / 2^(s − 127)) (values
/// between 6 and 8 times the scale saturate to 6). Writes codes [rows, k/2] (row stride ldc bytes)
/// and scales [rows, k/32] (row stride lds bytes). Throws moekit::Error on bad arguments.
void quantize_mxfp4(const float* w, int64_t rows, int64_t k, int64_t ldw, uint8_t* codes, int64_t ldc,
                    uint8_t* scales, int64_t lds);

/// The exact values of MXFP4 weights: out[r, j] = e2m1(code) · 2^(s − 127) (gpt-oss's checkpoint
/// loader computes the same in bf16, which holds them exactly). out row stride ldo doubles.
void dequantize_mxfp4(const uint8_t* codes, int64_t ldc, const uint8_t* scales, int64_t lds, int64_t rows,
                      int64_t k, double* out, int64_t ldo);

/// The FP8 block-scaled form of MXFP4 weights (docs/design.md §MXFP4 weights): per block of 128
/// rows x 128 of K, m = the block's largest scale byte and sb = 2^(m − 133) (FP32, exact); each
/// element q = e4m3(e2m1(code) · 2^(s − m + 6)) with s its own 32-block's byte (RNE, saturating),
/// so q · sb equals the MXFP4 value exactly while s ≥ m − 14 (the block's scales span at most 15
/// binades). Smaller ones round to E4M3 subnormals: an absolute error of at most 2^(m − 143), below
/// 2^−18.5 of the block's largest possible magnitude 6 · 2^(m − 127). A block with a NaN scale
/// (255) gets sb = NaN. Writes q [rows, k] E4M3 bits (row stride ldq bytes) and sb
/// [ceil(rows/128), ceil(k/128)] row-major: the layout of moekit's FP8 weights and their scales.
void mxfp4_to_fp8(const uint8_t* codes, int64_t ldc, const uint8_t* scales, int64_t lds, int64_t rows, int64_t k,
                  uint8_t* q, int64_t ldq, float* sb);

/// The scales in the form the expansion uses (src/kernels/sm90/mxfp4_expand.cuh): sb per 128 x 128
/// block as mxfp4_to_fp8 writes it, and per 32-block the shift s − m + 6 (m the block's largest
/// finite scale byte), clamped to [kMxfp4ZeroShift, 6] (−13 and below expand to zeros; a NaN scale's own
/// block has sb = NaN). shifts [rows, k/32] (row stride ldsh), sb [ceil(rows/128), ceil(k/128)].
void mxfp4_shifts(const uint8_t* scales, int64_t lds, int64_t rows, int64_t k, int8_t* shifts, int64_t ldsh,
                  float* sb);

/// The largest span, in binades, of the finite scale bytes inside any 128 x 128 block:
/// max over blocks of (max s − min s) + 1. The FP8 form is exact iff this is at most 15.
int mxfp4_max_block_span(const uint8_t* scales, int64_t lds, int64_t rows, int64_t k);

/// gpt-oss's W1 (`mlp1`, `gate_up_proj`) interleaves rows: row 2i is gate row i, row 2i + 1 up row
/// i; moekit's W1 holds the gate rows [0, I) then the up rows [I, 2I). Returns the gpt-oss row
/// that moekit's row `row` (< 2 · inter) comes from.
constexpr int64_t gpt_oss_w1_source_row(int64_t row, int64_t inter) {
  return row < inter ? 2 * row : 2 * (row - inter) + 1;
}

/// Copies rows [0, 2 · inter) of a gpt-oss W1 tensor (codes, scales or bias: `row_bytes` bytes per
/// row, consecutive rows) into moekit's order (gpt_oss_w1_source_row), for one expert.
void gpt_oss_w1_to_moekit_rows(const void* src, int64_t inter, int64_t row_bytes, void* dst);

}  // namespace moekit
