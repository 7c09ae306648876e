// moekit — SwiGLU (+ optional clamp) followed by 1x128 FP8 quantization, the unfused stage between
// GEMM1 and GEMM2 of the MoE layer (include/moekit/moe_ops.h, SPEC §3).
//
// Kernel: each warp processes "units" = (row r, pair of 128-column groups of h). Lanes 0-15 take
// the even group of the pair and lanes 16-31 the odd one; each lane owns 8 consecutive columns c:
//   one 16-byte load of 8 gate bf16 (gu[r, c]) and one of 8 up bf16 (gu[r, I + c]),
//   h = silu(g') * u' in FP32, with g' = limit > 0 ? (g > limit ? limit : g) : g and
//   u' = limit > 0 ? clamp(u, -limit, limit) : u (comparisons, so a NaN passes through unchanged),
//   silu(g) = g / (1.0f + expf(-g)) with the accurate expf and an IEEE division (__fdiv_rn), then
//   the product with u' — the same float operations as swiglu_quantize_reference (only expf vs
//   std::exp rounding can differ).
// The group amax is a 4-step xor-shuffle max inside each half-warp (NaN ignored by fmaxf, like the
// activation quantizer), the scale comes from quant::block_scale and q = e4m3(h / s) from
// quant::scaled + quant::cvt_e4m3x2 (kernels/sm90/quantize_device.h), so for equal h the bits equal
// those of the host quantize_1x128. q goes out as one 8-byte store per lane, the scale of group kb by
// lane 0 / lane 16 to sa[kb * sfa_ld(rows) + r] (physical A-scale layout).
// A partial last group (I % 128 != 0; I % 16 == 0 so a lane's 8 columns are all valid or all past I)
// is handled per lane: lanes past I neither load nor store and contribute 0 to the amax.
// No host synchronization, no allocation: graph-capturable.
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "common/check.h"
#include "kernels/sm90/quantize_device.h"
#include "moekit/moe_ops.h"
#include "moekit/numerics.h"
#include "ptx/ptx_memory.cuh"

namespace moekit {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kMaxGrid = 1 << 20;  // grid-stride beyond this many CTAs

using namespace sm90::quant;

struct SwigluParams {
  const uint16_t* gu;
  int64_t ld_gu;  // elements
  uint8_t* hq;
  int64_t ld_hq;  // bytes
  float* sa;
  int64_t sa_ld;  // sfa_ld(rows)
  int64_t units;  // rows * pairs
  const int32_t* rows_used;  // optional device row count (units past it are skipped)
  float limit;    // > 0: clamp; otherwise no clamp
  int inter;
  int groups;  // ceil(inter / 128)
  int pairs;   // ceil(groups / 2)
};

// silu(g') * u' of one element, in the exact operation order of the host reference.
template <bool kClamp>
__device__ __forceinline__ float swiglu1(float g, float u, float limit) {
  if constexpr (kClamp) {
    g = g > limit ? limit : g;                                  // upper clamp only; NaN kept
    u = u > limit ? limit : (u < -limit ? -limit : u);          // both sides; NaN kept
  }
  const float den = 1.0f + expf(-g);
  return __fmul_rn(__fdiv_rn(g, den), u);
}

template <bool kClamp, bool kUe8m0>
__global__ void __launch_bounds__(kThreads) swiglu_quantize_kernel(const SwigluParams p) {
  const int lane = threadIdx.x & 31;
  const int half = lane >> 4;
  const int sub = lane & 15;
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  int64_t units = p.units;
  if (p.rows_used) {
    const int64_t used = int64_t(__ldg(p.rows_used)) * p.pairs;
    units = used < units ? (used > 0 ? used : 0) : units;
  }
  for (int64_t unit = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); unit < units;
       unit += warps) {
    const int64_t row = unit / p.pairs;
    const int pair = static_cast<int>(unit - row * p.pairs);
    const int g = pair * 2 + half;
    const int col = g * 128 + sub * 8;
    const bool valid = col < p.inter;

    const uint16_t* gr = p.gu + row * p.ld_gu;
    uint4 gv = make_uint4(0u, 0u, 0u, 0u), uv = make_uint4(0u, 0u, 0u, 0u);
    if (valid) {
      gv = ptx::ld_global_nc_no_allocate_v4(gr + col);
      uv = ptx::ld_global_nc_no_allocate_v4(gr + p.inter + col);
    }

    const uint32_t gw[4] = {gv.x, gv.y, gv.z, gv.w};
    const uint32_t uw[4] = {uv.x, uv.y, uv.z, uv.w};
    float h[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      h[2 * i] = swiglu1<kClamp>(bf16_lo(gw[i]), bf16_lo(uw[i]), p.limit);
      h[2 * i + 1] = swiglu1<kClamp>(bf16_hi(gw[i]), bf16_hi(uw[i]), p.limit);
    }
    // Lanes past I hold g = u = 0 → h = 0: they leave the amax (which starts at 0) unchanged.
    float a = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) a = fmaxf(a, fabsf(h[i]));
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, off));

    const float s = block_scale<kUe8m0>(a);
    const float inv = kUe8m0 ? __frcp_rn(s) : 0.0f;
    if (valid) {
      uint32_t q[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        q[i] = cvt_e4m3x2(scaled<kUe8m0>(h[2 * i], s, inv), scaled<kUe8m0>(h[2 * i + 1], s, inv));
      }
      *reinterpret_cast<uint2*>(p.hq + row * p.ld_hq + col) = make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16));
    }
    if (sub == 0 && g < p.groups) p.sa[int64_t(g) * p.sa_ld + row] = s;
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

template <bool kClamp>
void launch(const SwigluParams& p, int grid, bool ue8m0, cudaStream_t stream) {
  if (ue8m0) {
    swiglu_quantize_kernel<kClamp, true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    swiglu_quantize_kernel<kClamp, false><<<grid, kThreads, 0, stream>>>(p);
  }
}

}  // namespace

void swiglu_quantize(const void* gu, int64_t ld_gu, int64_t rows, int64_t inter, float limit, void* hq,
                     int64_t ld_hq, float* sa, bool ue8m0, cudaStream_t stream, const int32_t* rows_used) {
  static constexpr const char* fn = "moekit::swiglu_quantize";
  MOEKIT_REQUIRE(rows >= 0, ErrorCode::kInvalidArgument, fn, ": rows = ", rows, " must be >= 0");
  MOEKIT_REQUIRE(rows <= (int64_t{1} << 40), ErrorCode::kInvalidArgument, fn, ": rows = ", rows,
                 " is too large");
  MOEKIT_REQUIRE(inter >= 16 && inter % 16 == 0, ErrorCode::kInvalidArgument, fn, ": inter = ", inter,
                 " must be >= 16 and a multiple of 16");
  MOEKIT_REQUIRE(inter <= (int64_t{1} << 29), ErrorCode::kInvalidArgument, fn, ": inter = ", inter,
                 " is too large (at most 2^29)");
  MOEKIT_REQUIRE(!std::isnan(limit), ErrorCode::kInvalidArgument, fn,
                 ": limit is NaN (use a value <= 0 to disable the clamp)");
  MOEKIT_REQUIRE(ld_gu >= 2 * inter, ErrorCode::kInvalidArgument, fn, ": ld_gu = ", ld_gu,
                 " must be >= 2 * inter = ", 2 * inter);
  MOEKIT_REQUIRE(ld_hq >= inter, ErrorCode::kInvalidArgument, fn, ": ld_hq = ", ld_hq,
                 " must be >= inter = ", inter);
  MOEKIT_REQUIRE(ld_gu % 8 == 0, ErrorCode::kMisaligned, fn, ": ld_gu = ", ld_gu,
                 " must be a multiple of 8 elements (16-byte rows)");
  MOEKIT_REQUIRE(ld_hq % 16 == 0, ErrorCode::kMisaligned, fn, ": ld_hq = ", ld_hq,
                 " must be a multiple of 16 bytes");
  if (rows == 0) return;
  MOEKIT_REQUIRE(gu != nullptr, ErrorCode::kInvalidArgument, fn, ": gu is null with rows = ", rows);
  MOEKIT_REQUIRE(hq != nullptr, ErrorCode::kInvalidArgument, fn, ": hq is null with rows = ", rows);
  MOEKIT_REQUIRE(sa != nullptr, ErrorCode::kInvalidArgument, fn, ": sa is null with rows = ", rows);
  MOEKIT_REQUIRE(aligned16(gu), ErrorCode::kMisaligned, fn, ": gu (", gu, ") must be 16-byte aligned");
  MOEKIT_REQUIRE(aligned16(hq), ErrorCode::kMisaligned, fn, ": hq (", hq, ") must be 16-byte aligned");
  MOEKIT_REQUIRE(aligned16(sa), ErrorCode::kMisaligned, fn, ": sa (", static_cast<const void*>(sa),
                 ") must be 16-byte aligned");

  SwigluParams p{};
  p.gu = static_cast<const uint16_t*>(gu);
  p.ld_gu = ld_gu;
  p.hq = static_cast<uint8_t*>(hq);
  p.ld_hq = ld_hq;
  p.sa = sa;
  p.sa_ld = sfa_ld(rows);
  p.limit = limit;
  p.inter = static_cast<int>(inter);
  p.groups = static_cast<int>(ceil_div(inter, kQuantBlock));
  p.pairs = static_cast<int>(ceil_div(p.groups, 2));
  p.units = rows * p.pairs;
  p.rows_used = rows_used;
  const int64_t blocks = ceil_div(p.units, kWarpsPerBlock);
  // With a device row count the real work may be far smaller than `rows`: a bounded grid-stride
  // grid keeps the launch of empty blocks cheap.
  const int64_t cap = rows_used ? int64_t(4096) : int64_t(kMaxGrid);
  const int grid = static_cast<int>(blocks < cap ? blocks : cap);
  if (limit > 0.0f) {
    launch<true>(p, grid, ue8m0, stream);
  } else {
    launch<false>(p, grid, ue8m0, stream);
  }
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit
