// moekit — element-wise MoE stages between the grouped GEMMs (the unfused path; the fused
// epilogues of the MoE layer compute the same functions).
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit {

/// SwiGLU with optional clamp, then 1x128 FP8 quantization (SPEC §3):
///   g = gu[r, c], u = gu[r, I + c] (bf16 [rows, 2I], row stride ld_gu elements);
///   if limit > 0: g = min(g, limit), u = clamp(u, -limit, limit);
///   h = silu(g) * u = g / (1 + exp(-g)) * u, computed in FP32;
///   hq = quant_1x128(h) → FP8 [rows, I] (row stride ld_hq bytes) and scales in the physical
///   A-scale layout over `rows` rows (sa[kb * sfa_ld(rows) + r]).
/// Requires I % 16 == 0, ld_gu % 8 == 0 (≥ 2I), ld_hq % 16 == 0 (≥ I), 16-byte aligned pointers.
/// limit ≤ 0 disables the clamp. rows == 0 is a no-op. Graph-capturable.
/// `rows_used` (optional, device int32): only rows below *rows_used are processed (e.g. offsets[E]
/// of the contiguous layout, so a rows upper bound costs nothing past the real rows); the grid is
/// still sized from `rows` (no host synchronization).
void swiglu_quantize(const void* gu, int64_t ld_gu, int64_t rows, int64_t inter, float limit, void* hq,
                     int64_t ld_hq, float* sa, bool ue8m0, cudaStream_t stream, const int32_t* rows_used = nullptr);

/// Host reference of swiglu_quantize (gu as float [rows, 2I]); h computed in float exactly as
/// documented (expf), so only exp rounding can differ from the device.
void swiglu_quantize_reference(const float* gu, int64_t rows, int64_t inter, float limit, uint8_t* hq,
                               float* scales_logical, bool ue8m0);

/// Combine: y[t, :] = Σ_j topk_weights[t*k + j] · d[expanded_to_permuted[t*k + j], :] over the
/// slots that have a row (a permuted row index ≥ 0), accumulated in FP32 in slot order
/// j = 0 … k-1 and rounded once to bf16 — deterministic, bit-identical from run to run. Tokens whose
/// slots were all dropped get y = 0. d: bf16 [rows, H] (row stride ldd), y: bf16 [T, H] (row stride
/// ldy). Requires H % 8 == 0, ldd and ldy multiples of 8, 16-byte aligned d and y. T == 0 is a no-op.
void moe_combine(const void* d, int64_t ldd, const int32_t* expanded_to_permuted, const float* topk_weights,
                 int64_t num_tokens, int top_k, int64_t hidden, void* y, int64_t ldy, cudaStream_t stream);

}  // namespace moekit
