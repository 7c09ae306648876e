// moekit — device routines of the bf16 → FP8 E4M3 block quantizers (SPEC §1), shared by the
// quantization kernels (quantize.cu) and the MoE activation permutation (moe/moe_permute.cu) so that
// every path produces the same bits as the host quantizers of numerics.h.
//
// Compiled by nvcc only (it includes the CUDA toolkit headers); it is deliberately not a .cuh, so
// the JIT does not embed it.
//
// Numerics (bit for bit the host quantizers of numerics.h):
//   amax = max |x| over the block's valid elements, NaN ignored (fmaxf, starting from 0)
//   s    = max(amax, 1e-4f) / 448.0f                       (IEEE division)
//   ue8m0: s rounded up to a power of two on its bits (exact powers of two unchanged)
//   q    = e4m3(x / s): IEEE division (__fdiv_rn), then cvt.rn.satfinite.e4m3x2.f32.
// With ue8m0, s = 2^e and x / s is computed as x * 2^-e: 2^-e is exact (e ∈ [-22, 120]), so the
// product is the same real number as the quotient and rounds to the same float, subnormal results
// included; s = +Inf gives 2^-e = 0 and the same ±0 / NaN results as the division.
#pragma once
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "ptx/ptx_memory.cuh"

namespace moekit::sm90::quant {

// The two bf16 of a 32-bit word as exact floats (element 2i in the low half, 2i+1 in the high).
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

__device__ __forceinline__ float amax8(const uint4& v, float a) {
  a = fmaxf(a, fabsf(bf16_lo(v.x)));
  a = fmaxf(a, fabsf(bf16_hi(v.x)));
  a = fmaxf(a, fabsf(bf16_lo(v.y)));
  a = fmaxf(a, fabsf(bf16_hi(v.y)));
  a = fmaxf(a, fabsf(bf16_lo(v.z)));
  a = fmaxf(a, fabsf(bf16_hi(v.z)));
  a = fmaxf(a, fabsf(bf16_lo(v.w)));
  a = fmaxf(a, fabsf(bf16_hi(v.w)));
  return a;
}

// s = max(amax, 1e-4) / 448, optionally rounded up to a power of two on its bits.
template <bool kUe8m0>
__device__ __forceinline__ float block_scale(float amax) {
  float s = __fdiv_rn(fmaxf(amax, 1e-4f), 448.0f);
  if constexpr (kUe8m0) {
    uint32_t b = __float_as_uint(s);  // s > 0: normal or +Inf
    if (b & 0x007FFFFFu) b = (b & 0xFF800000u) + 0x00800000u;
    s = __uint_as_float(b);
  }
  return s;
}

// x / s, exactly rounded. `inv` = 1/s is used only when s is a power of two (kUe8m0).
template <bool kUe8m0>
__device__ __forceinline__ float scaled(float x, float s, float inv) {
  if constexpr (kUe8m0) {
    return x * inv;
  } else {
    return __fdiv_rn(x, s);
  }
}

// Two floats → two E4M3 bytes (a in the low byte), hardware RN + satfinite conversion.
__device__ __forceinline__ uint32_t cvt_e4m3x2(float a, float b) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

// Quantizes the 8 bf16 of v by scale s into 8 E4M3 bytes (element 0 in the lowest byte).
template <bool kUe8m0>
__device__ __forceinline__ uint2 quant8(const uint4& v, float s, float inv) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    p[i] = cvt_e4m3x2(scaled<kUe8m0>(bf16_lo(w[i]), s, inv), scaled<kUe8m0>(bf16_hi(w[i]), s, inv));
  }
  return make_uint2(p[0] | (p[1] << 16), p[2] | (p[3] << 16));
}

// ---------------------------------------------------------------------------------------------
// 1x128 activation quantization of one warp "unit"
// ---------------------------------------------------------------------------------------------
// A unit is (row, chunk of 2*U consecutive 128-column groups). Lanes 0-15 take the even groups of
// the chunk and lanes 16-31 the odd ones; each lane owns 8 consecutive columns (one 16-byte load
// of 8 bf16), so 16 lanes cover a group and a warp-wide load reads 512 contiguous bytes. All U
// loads of a lane are issued before any math (U × 16 bytes in flight per lane). The group amax is
// a 4-step xor-shuffle max inside each half-warp; q goes out as one 8-byte store per lane (256
// contiguous bytes per warp store), the scale of group g by lane 0 / lane 16 to
// scale_row[g * scale_stride] (the caller picks the scale layout: physical sa + row with stride
// sfa_ld(m), or logical s + row * groups with stride 1).
// A partial last group (k % 128 != 0, k % 16 == 0) is handled per lane: a lane's 8 columns are
// either all valid or all past k (k % 8 == 0); lanes past k neither load nor store and contribute
// 0 to the amax (which starts at 0, so they change nothing).
// Must be called by all 32 lanes of a warp with the same unit (the shuffles use the full mask).

/// Per-warp unroll U (group pairs per unit) for an m x k activation: 4 (64 bytes in flight per
/// lane, least per-unit overhead) when that still gives several waves of warps, else 2, else 1
/// (more warps for small inputs). A wave is 132 SMs x 32 resident warps (H100 SXM; only a
/// performance heuristic, the results do not depend on it).
inline int act_unroll_for(int64_t m, int64_t groups) {
  constexpr int64_t kWave = 132 * 32;
  if (m * ((groups + 7) / 8) >= 4 * kWave) return 4;
  if (m * ((groups + 3) / 4) >= 2 * kWave) return 2;
  return 1;
}

/// The loads and group maxima of one unit: v[u] = the 16 bytes (8 bf16) of columns
/// (g0 + 2u) * 128 + 8 sub of row xr (zeros past k), every load issued before any math; a[u] = the
/// amax of group g0 + 2u over its half-warp (4-step xor-shuffle max, NaN ignored). All shuffles
/// come before any division, so no collective sits after divergent code.
/// Calls f(std::integral_constant<int, U>{}) with U = act_unroll_for(m, groups), so a launcher
/// instantiates its kernel for the three unrolls in one place.
template <class F>
inline void with_act_unroll(int64_t m, int64_t groups, F&& f) {
  switch (act_unroll_for(m, groups)) {
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    default:
      f(std::integral_constant<int, 1>{});
      break;
  }
}

template <int U>
__device__ __forceinline__ void load_unit_amax(const uint16_t* xr, int k, int g0, int sub, uint4 (&v)[U],
                                               float (&a)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int col = (g0 + 2 * u) * 128 + sub * 8;
    if (col < k) {
      v[u] = ptx::ld_global_nc_no_allocate_v4(xr + col);
    } else {
      v[u] = make_uint4(0u, 0u, 0u, 0u);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) a[u] = amax8(v[u], 0.0f);
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) {
#pragma unroll
    for (int u = 0; u < U; ++u) a[u] = fmaxf(a[u], __shfl_xor_sync(0xFFFFFFFFu, a[u], off));
  }
}

template <int U, bool kUe8m0>
__device__ __forceinline__ void quantize_act_unit(const uint16_t* xr, uint8_t* qr, float* scale_row,
                                                  int64_t scale_stride, int k, int groups, int chunk) {
  const int lane = threadIdx.x & 31;
  const int half = lane >> 4;             // 0: even groups of the chunk, 1: odd groups
  const int sub = lane & 15;              // 8-column segment inside the group
  const int g0 = chunk * (2 * U) + half;  // this half-warp's first group

  uint4 v[U];
  float a[U];
  load_unit_amax<U>(xr, k, g0, sub, v, a);

#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int g = g0 + 2 * u;
    const int col = g * 128 + sub * 8;
    const float s = block_scale<kUe8m0>(a[u]);
    const float inv = kUe8m0 ? __frcp_rn(s) : 0.0f;
    if (col < k) {
      *reinterpret_cast<uint2*>(qr + col) = quant8<kUe8m0>(v[u], s, inv);
    }
    if (sub == 0 && g < groups) scale_row[int64_t(g) * scale_stride] = s;
  }
}

}  // namespace moekit::sm90::quant
