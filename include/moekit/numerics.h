// moekit — host-side number formats, quantizers, scale layouts and the float64 reference.
//
// These functions run on the CPU. They define the numerics of SPEC §1–2 that every GPU kernel is
// tested against: E4M3 (OCP "fn") conversion with round-to-nearest-even and saturation to ±448,
// the 1x128 activation and 128x128 weight quantizers (optionally with ue8m0 power-of-two scales),
// a float64 block-scaled GEMM reference, and the conversion between the logical and physical
// layouts of the activation scales.
#pragma once
#include <cstddef>
#include <cstdint>

namespace moekit {

/// Elements per quantization block along K (and along N for weights).
inline constexpr int64_t kQuantBlock = 128;

/// ceil(a / b) for positive b.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
/// a rounded up to a multiple of b.
constexpr int64_t align_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// ---------------------------------------------------------------------------------------------
// Scalar formats
// ---------------------------------------------------------------------------------------------

/// FP32 → E4M3 bits: round to nearest even, saturate to ±448 (±inf → ±448); any NaN → 0x7F
/// (sign dropped, exactly as the GPU's cvt.rn.satfinite.e4m3x2.f32 does).
uint8_t e4m3_from_float(float x);
/// E4M3 bits → FP32 (exact). 0x7F / 0xFF decode to NaN.
float e4m3_to_float(uint8_t bits);
/// FP32 → BF16 bits, round to nearest even; any NaN → 0x7FFF (as cvt.rn.bf16.f32).
uint16_t bf16_from_float(float x);
/// BF16 bits → FP32 (exact).
float bf16_to_float(uint16_t bits);

/// The quantization scale of a block whose absolute maximum is `amax` (SPEC §1):
/// `max(amax, 1e-4) / 448`, or with `ue8m0` that value rounded up to a power of two.
float quant_scale(float amax, bool ue8m0);

// ---------------------------------------------------------------------------------------------
// Quantizers (logical scale layouts)
// ---------------------------------------------------------------------------------------------

/// Per-token 1x128 quantization of x[m, k] (row stride ldx floats).
/// Writes q[m, k] (row stride ldq bytes) as E4M3 bits and scales[m, ceil(k/128)] row-major
/// (the *logical* layout). A partial last block gets its own scale over its valid elements.
/// q = e4m3(x / s) with an IEEE division, so GPU kernels can match it bit for bit.
void quantize_1x128(const float* x, int64_t m, int64_t k, int64_t ldx, uint8_t* q, int64_t ldq,
                    float* scales, bool ue8m0);

/// 128x128 block quantization of w[n, k] (row stride ldw floats). Writes q[n, k] (row stride
/// ldq bytes) and scales[ceil(n/128), ceil(k/128)] row-major (logical == physical for weights).
void quantize_128x128(const float* w, int64_t n, int64_t k, int64_t ldw, uint8_t* q, int64_t ldq,
                      float* scales, bool ue8m0);

// ---------------------------------------------------------------------------------------------
// Activation-scale layouts
// ---------------------------------------------------------------------------------------------
// Logical:  sa[m, kb], row-major, kb = ceil(k/128) columns.
// Physical: K-block-major ("MN-major"), sa_phys[kb * sfa_ld(m) + row], so one TMA box reads the
//           scales of BLOCK_M consecutive rows of one K block. sfa_ld(m) = align_up(m, 4) keeps
//           every K-block row 16-byte aligned as TMA requires. Padding entries are never read.

/// Leading dimension (in floats) of the physical activation-scale layout for m rows.
constexpr int64_t sfa_ld(int64_t m) { return align_up(m, 4); }
/// Number of floats of the physical activation-scale buffer for an m x k activation.
constexpr int64_t sfa_physical_size(int64_t m, int64_t k) { return ceil_div(k, kQuantBlock) * sfa_ld(m); }

/// Logical [m, kb] → physical [kb, sfa_ld(m)]. Padding entries are set to 0.
void sfa_logical_to_physical(const float* logical, int64_t m, int64_t k, float* physical);
/// Physical [kb, sfa_ld(m)] → logical [m, kb].
void sfa_physical_to_logical(const float* physical, int64_t m, int64_t k, float* logical);

// ---------------------------------------------------------------------------------------------
// Reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of the block-scaled NT GEMM (SPEC §2):
/// d[i, j] = Σ_kb sa[i, kb] · sb[j/128, kb] · Σ_{k∈kb} e4m3(qa[i,k]) · e4m3(qb[j,k]).
/// qa: [m, k] (row stride lda bytes), sa: logical [m, ceil(k/128)],
/// qb: [n, k] (row stride ldb bytes), sb: [ceil(n/128), ceil(k/128)], d: [m, n] row-major.
/// Multithreaded over rows (std::thread), deterministic.
void gemm_reference(const uint8_t* qa, int64_t lda, const float* sa, const uint8_t* qb, int64_t ldb,
                    const float* sb, int64_t m, int64_t n, int64_t k, double* d);

/// ‖out − ref‖₂ / ‖ref‖₂ over n values (NaN in out or ref → returns NaN). With ref all zero the
/// absolute ‖out‖₂ is returned.
double relative_l2_error(const float* out, const double* ref, size_t n);

}  // namespace moekit
