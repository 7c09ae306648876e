// moekit — per-token 1x128 FP8 quantization of activations, scattered to permuted rows (or kept
// token-major), as warp-level device code shared by the permute kernels (moe_permute.cu) and the
// fused route + sort + quantize launch for small batches (route_sort.cu).
#pragma once
#include <cstdint>

#include "kernels/sm90/quantize_device.h"
#include "ptx/ptx.cuh"

namespace moekit::detail {

struct ScatterParams {
  const uint16_t* x;                 // [T, H] bf16
  const int32_t* expanded_to_permuted;  // [T * k]; null: token mode (token t → row t, top_k 1)
  uint8_t* a_perm;                   // [rows, H] FP8
  float* sa_perm;                    // [groups, sa_ld]
  int64_t units;                     // T * chunks_per_row
  int64_t rows;                      // rows_bound
  int64_t sa_ld;                     // sfa_ld(rows_bound)
  int hidden;
  int groups;
  int chunks_per_row;
  int top_k;
  float* zero_acc;                   // optional [T, hidden] FP32 zeroed alongside (MoE GEMM2's y_acc)
  unsigned* zero_u32;                // optional counters zeroed alongside (the MoE GEMMs' tile counters)
  int num_zero_u32;
  /// Optional [T, groups] (token-major, logical layout): each token's scales are stored here once
  /// instead of into sa_perm once per slot; gather_scales_kernel (moe_permute.cu) then fills sa_perm
  /// in row order. (The per-slot stores are 4-byte writes to random rows of each K block's column:
  /// at T = 16384 they cost 160 of the pass's 580 us, docs/performance.md §Token scales in the permute.)
  float* sa_token = nullptr;
};

// One unit (token row, chunk of 2U 128-column groups) quantized in registers, exactly as
// sm90::quant::quantize_act_unit.
template <int U>
struct QuantUnit {
  float sc[U];  // this lane's half's group scales
  uint2 q[U];   // this lane's 8 FP8 codes per group
};

// Reads and quantizes the unit; touches only x. Must be called by all 32 lanes with the same unit.
template <int U, bool kUe8m0>
__device__ __forceinline__ void quantize_unit(const ScatterParams& p, int64_t row, int chunk, QuantUnit<U>& out) {
  using namespace sm90::quant;
  const int lane = threadIdx.x & 31;
  const int g0 = chunk * (2 * U) + (lane >> 4);
  uint4 v[U];
  float a[U];
  load_unit_amax<U>(p.x + row * p.hidden, int(p.hidden), g0, lane & 15, v, a);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    out.sc[u] = block_scale<kUe8m0>(a[u]);
    const float inv = kUe8m0 ? __frcp_rn(out.sc[u]) : 0.0f;
    out.q[u] = quant8<kUe8m0>(v[u], out.sc[u], inv);
  }
}

// Stores a quantized unit to every permuted row of its token (and zeroes the unit's columns of the
// token's accumulator row when asked). Must be called by all 32 lanes with the same unit.
template <int U>
__device__ __forceinline__ void scatter_unit(const ScatterParams& p, int64_t row, int chunk, const QuantUnit<U>& qu) {
  const int lane = threadIdx.x & 31;
  const int sub = lane & 15;
  const int g0 = chunk * (2 * U) + (lane >> 4);
  if (p.zero_acc) {  // the unit's columns of the token's FP32 accumulator row
    const int c_end = (chunk + 1) * (2 * U) * 128 < p.hidden ? (chunk + 1) * (2 * U) * 128 : p.hidden;
    float* acc_row = p.zero_acc + row * p.hidden;
    for (int c = chunk * (2 * U) * 128 + 4 * lane; c < c_end; c += 128)
      *reinterpret_cast<float4*>(acc_row + c) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if (p.sa_token && sub == 0) {  // lane 0 the unit's even groups, lane 16 its odd ones
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int g = g0 + 2 * u;
      if (g < p.groups) p.sa_token[row * p.groups + g] = qu.sc[u];
    }
  }
  for (int j0 = 0; j0 < p.top_k; j0 += 32) {
    const int nj = p.top_k - j0 < 32 ? p.top_k - j0 : 32;
    // Token mode (no map): the token's own row.
    int32_t mine = -1;
    if (lane < nj) mine = p.expanded_to_permuted ? ptx::ld_chain(p.expanded_to_permuted + row * p.top_k + j0 + lane) : int32_t(row);
    if (mine < 0 || int64_t(mine) >= p.rows) mine = -1;  // dropped slot, or a row outside the buffer
    // FP8 codes: row by row, each lane its 8 columns of every group of the unit.
    for (int j = 0; j < nj; ++j) {
      const int32_t r = __shfl_sync(0xFFFFFFFFu, mine, j);
      if (r < 0) continue;  // uniform over the warp
      uint8_t* qr = p.a_perm + int64_t(r) * p.hidden;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int col = (g0 + 2 * u) * 128 + sub * 8;
        if (col < p.hidden) *reinterpret_cast<uint2*>(qr + col) = qu.q[u];
      }
    }
    if (p.sa_token) continue;
    // Scales: lane `sub` of each half stores its half's groups for slots j0 + sub and j0 + 16 + sub
    // (every lane of a half holds the group's scale after the shuffles).
    const int32_t ra = __shfl_sync(0xFFFFFFFFu, mine, sub);
    const int32_t rb = __shfl_sync(0xFFFFFFFFu, mine, sub + 16);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int g = g0 + 2 * u;
      if (g < p.groups) {
        if (ra >= 0) p.sa_perm[int64_t(g) * p.sa_ld + ra] = qu.sc[u];
        if (rb >= 0) p.sa_perm[int64_t(g) * p.sa_ld + rb] = qu.sc[u];
      }
    }
  }
}

/// Quantizes units warp, warp + warps, ... of p and scatters each (all 32 lanes of a warp together).
template <int U, bool kUe8m0>
__device__ __forceinline__ void quantize_scatter_units(const ScatterParams& p, int64_t warp, int64_t warps) {
  QuantUnit<U> qu;
  for (int64_t unit = warp; unit < p.units; unit += warps) {
    const int64_t row = unit / p.chunks_per_row;
    const int chunk = static_cast<int>(unit - row * p.chunks_per_row);
    quantize_unit<U, kUe8m0>(p, row, chunk, qu);
    scatter_unit<U>(p, row, chunk, qu);
  }
}

/// CTA `cta` of `ctas` quantization CTAs placed after a sort's CTAs in one launch (moe_route_sort,
/// moe_sort_quantize): the first zeroes the counters, all quantize their share of p's units (token
/// mode, one 128-column group pair per warp and unit: set_scatter_unroll(p, T, 1)).
template <int kThreadsPerCta>
__device__ __forceinline__ void quantize_ctas(const ScatterParams& p, unsigned cta, unsigned ctas) {
  if (cta == 0)
    for (int i = int(threadIdx.x); i < p.num_zero_u32; i += kThreadsPerCta) p.zero_u32[i] = 0u;
  constexpr int kWarpsPerCta = kThreadsPerCta / 32;
  quantize_scatter_units<1, false>(p, int64_t(cta) * kWarpsPerCta + (threadIdx.x >> 5), int64_t(ctas) * kWarpsPerCta);
}

}  // namespace moekit::detail
