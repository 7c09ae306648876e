// moekit — GPU quantization kernels: bf16 → FP8 E4M3 with FP32 block scales (SPEC §1).
//
// Numerics (bit for bit the host quantizers of numerics.h):
//   amax = max |x| over the block's valid elements, NaN ignored (fmaxf, starting from 0)
//   s    = max(amax, 1e-4f) / 448.0f                       (IEEE division)
//   ue8m0: s rounded up to a power of two on its bits (exact powers of two unchanged)
//   q    = e4m3(x / s): IEEE division (__fdiv_rn), then cvt.rn.satfinite.e4m3x2.f32.
// With ue8m0, s = 2^e and x / s is computed as x * 2^-e: 2^-e is exact (e ∈ [-22, 120]), so the
// product is the same real number as the quotient and rounds to the same float, subnormal results
// included; s = +Inf gives 2^-e = 0 and the same ±0 / NaN results as the division.
//
// Activation kernel (1x128): each warp processes a "unit" = (row, chunk of 2*U consecutive
// 128-column groups). Lanes 0-15 take the even groups of the chunk and lanes 16-31 the odd ones;
// each lane owns 8 consecutive columns (one 16-byte load of 8 bf16), so 16 lanes cover a group and
// a warp-wide load reads 512 contiguous bytes. All U loads of a lane are issued before any math
// (U × 16 bytes in flight per lane; U = 4, 2 or 1 is picked on the host from the amount of work). The group amax is a 4-step xor-shuffle max inside each
// half-warp; q goes out as one 8-byte store per lane (256 contiguous bytes per warp store), the
// scale by lane 0 / lane 16 into the physical layout sa[kb * sfa_ld(m) + row].
// A partial last group (k % 128 != 0, k % 16 == 0) is handled per lane: a lane's 8 columns are
// either all valid or all past k (k % 8 == 0); lanes past k neither load nor store and contribute
// 0 to the amax (which starts at 0, so they change nothing).
//
// Weight kernel (128x128): one 256-thread CTA per block; each thread keeps 8 row segments of
// 8 bf16 in registers (thread t: column segment t % 16, rows t / 16 + 16 i), reduces the amax
// through the warp and shared memory, then quantizes from registers.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "common/check.h"
#include "moekit/numerics.h"
#include "moekit/quantize.h"

namespace moekit {
namespace {

constexpr int kThreads = 256;  // both kernels
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kMaxGrid = 1 << 20;  // grid-stride beyond this many CTAs

// ---------------------------------------------------------------------------------------------
// Device helpers
// ---------------------------------------------------------------------------------------------

// 16-byte read-only load that does not allocate in L1 (x is streamed once).
__device__ __forceinline__ uint4 load_nc_16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

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
// 1x128 activation kernel
// ---------------------------------------------------------------------------------------------

struct ActParams {
  const uint16_t* x;
  int64_t ldx;  // elements
  uint8_t* q;
  int64_t ldq;  // bytes
  float* sa;
  int64_t sa_ld;  // sfa_ld(m)
  int64_t units;  // m * chunks_per_row
  int k;
  int groups;          // ceil(k / 128)
  int chunks_per_row;  // ceil(groups / (2 U))
};

template <int U, bool kUe8m0>
__global__ void __launch_bounds__(kThreads) quantize_act_1x128_kernel(const ActParams p) {
  const int lane = threadIdx.x & 31;
  const int half = lane >> 4;   // 0: even groups of the chunk, 1: odd groups
  const int sub = lane & 15;    // 8-column segment inside the group
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t unit = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); unit < p.units;
       unit += warps) {
    const int64_t row = unit / p.chunks_per_row;
    const int chunk = static_cast<int>(unit - row * p.chunks_per_row);
    const int g0 = chunk * (2 * U) + half;  // this half-warp's first group
    const uint16_t* xr = p.x + row * p.ldx;
    uint8_t* qr = p.q + row * p.ldq;

    // Issue every load of the unit first.
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int col = (g0 + 2 * u) * 128 + sub * 8;
      if (col < p.k) {
        v[u] = load_nc_16(xr + col);
      } else {
        v[u] = make_uint4(0u, 0u, 0u, 0u);
      }
    }

    // Group amax: max over the 16 lanes of each half-warp (xor offsets < 16 stay inside the
    // half). All shuffles come before any division, so no collective sits after divergent code.
    float a[U];
#pragma unroll
    for (int u = 0; u < U; ++u) a[u] = amax8(v[u], 0.0f);
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) {
#pragma unroll
      for (int u = 0; u < U; ++u) a[u] = fmaxf(a[u], __shfl_xor_sync(0xFFFFFFFFu, a[u], off));
    }

#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int g = g0 + 2 * u;
      const int col = g * 128 + sub * 8;
      const float s = block_scale<kUe8m0>(a[u]);
      const float inv = kUe8m0 ? __frcp_rn(s) : 0.0f;
      if (col < p.k) {
        *reinterpret_cast<uint2*>(qr + col) = quant8<kUe8m0>(v[u], s, inv);
      }
      if (sub == 0 && g < p.groups) p.sa[int64_t(g) * p.sa_ld + row] = s;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 128x128 weight kernel
// ---------------------------------------------------------------------------------------------

struct WeightParams {
  const uint16_t* w;
  int64_t ldw;  // elements
  uint8_t* q;
  int64_t ldq;  // bytes
  float* sb;
  int64_t n;
  int64_t blocks;  // ceil(n/128) * ceil(k/128)
  int k;
  int kblocks;  // ceil(k/128)
};

template <bool kUe8m0>
__global__ void __launch_bounds__(kThreads) quantize_weight_128x128_kernel(const WeightParams p) {
  constexpr int kRowsPerPass = kThreads / 16;   // 16 rows of 16 segments per pass
  constexpr int kPasses = 128 / kRowsPerPass;   // 8
  __shared__ float warp_max[kWarpsPerBlock];
  const int seg = threadIdx.x & 15;
  const int r0 = threadIdx.x >> 4;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;

  for (int64_t blk = blockIdx.x; blk < p.blocks; blk += gridDim.x) {
    const int64_t nb = blk / p.kblocks;
    const int kb = static_cast<int>(blk - nb * p.kblocks);
    const int col = kb * 128 + seg * 8;
    const bool col_ok = col < p.k;

    uint4 v[kPasses];
    float a = 0.0f;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int64_t row = nb * 128 + r0 + i * kRowsPerPass;
      if (col_ok && row < p.n) {
        v[i] = load_nc_16(p.w + row * p.ldw + col);
      } else {
        v[i] = make_uint4(0u, 0u, 0u, 0u);
      }
    }
#pragma unroll
    for (int i = 0; i < kPasses; ++i) a = amax8(v[i], a);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, off));
    if (lane == 0) warp_max[warp] = a;
    __syncthreads();
    a = warp_max[0];
#pragma unroll
    for (int i = 1; i < kWarpsPerBlock; ++i) a = fmaxf(a, warp_max[i]);
    __syncthreads();  // warp_max is reused by the next block of the grid-stride loop

    const float s = block_scale<kUe8m0>(a);
    const float inv = kUe8m0 ? __frcp_rn(s) : 0.0f;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int64_t row = nb * 128 + r0 + i * kRowsPerPass;
      if (col_ok && row < p.n) {
        *reinterpret_cast<uint2*>(p.q + row * p.ldq + col) = quant8<kUe8m0>(v[i], s, inv);
      }
    }
    if (threadIdx.x == 0) p.sb[nb * p.kblocks + kb] = s;
  }
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// Shared argument checks of both quantizers. `rows_name` is "m" or "n".
void validate(const char* fn, const char* rows_name, const void* x, const char* x_name, int64_t ldx,
              int64_t rows, int64_t k, const void* q, int64_t ldq, const float* scales,
              const char* scales_name) {
  MOEKIT_REQUIRE(rows >= 0, ErrorCode::kInvalidArgument, fn, ": ", rows_name, " = ", rows,
                 " must be >= 0");
  MOEKIT_REQUIRE(k >= 16 && k % 16 == 0, ErrorCode::kInvalidArgument, fn, ": k = ", k,
                 " must be >= 16 and a multiple of 16");
  MOEKIT_REQUIRE(k <= (int64_t{1} << 30), ErrorCode::kInvalidArgument, fn, ": k = ", k,
                 " is too large (at most 2^30)");
  MOEKIT_REQUIRE(rows <= (int64_t{1} << 40), ErrorCode::kInvalidArgument, fn, ": ", rows_name, " = ",
                 rows, " is too large");
  MOEKIT_REQUIRE(ldx >= k, ErrorCode::kInvalidArgument, fn, ": ld", x_name, " = ", ldx,
                 " must be >= k = ", k);
  MOEKIT_REQUIRE(ldq >= k, ErrorCode::kInvalidArgument, fn, ": ldq = ", ldq, " must be >= k = ", k);
  MOEKIT_REQUIRE(ldx % 8 == 0, ErrorCode::kMisaligned, fn, ": ld", x_name, " = ", ldx,
                 " must be a multiple of 8 elements (16-byte rows)");
  MOEKIT_REQUIRE(ldq % 16 == 0, ErrorCode::kMisaligned, fn, ": ldq = ", ldq,
                 " must be a multiple of 16 bytes");
  if (rows == 0) return;
  MOEKIT_REQUIRE(x != nullptr, ErrorCode::kInvalidArgument, fn, ": ", x_name, " is null with ",
                 rows_name, " = ", rows);
  MOEKIT_REQUIRE(q != nullptr, ErrorCode::kInvalidArgument, fn, ": q is null with ", rows_name,
                 " = ", rows);
  MOEKIT_REQUIRE(scales != nullptr, ErrorCode::kInvalidArgument, fn, ": ", scales_name,
                 " is null with ", rows_name, " = ", rows);
  MOEKIT_REQUIRE(aligned16(x), ErrorCode::kMisaligned, fn, ": ", x_name, " (", x,
                 ") must be 16-byte aligned");
  MOEKIT_REQUIRE(aligned16(q), ErrorCode::kMisaligned, fn, ": q (", q, ") must be 16-byte aligned");
  MOEKIT_REQUIRE(aligned16(scales), ErrorCode::kMisaligned, fn, ": ", scales_name, " (",
                 static_cast<const void*>(scales), ") must be 16-byte aligned");
}

int grid_for(int64_t work, int64_t per_block) {
  const int64_t blocks = ceil_div(work, per_block);
  return static_cast<int>(blocks < kMaxGrid ? blocks : kMaxGrid);
}

template <int U>
void launch_act(const ActParams& base, int64_t m, bool ue8m0, cudaStream_t stream) {
  ActParams p = base;
  p.chunks_per_row = static_cast<int>(ceil_div(p.groups, 2 * U));
  p.units = m * p.chunks_per_row;
  const int grid = grid_for(p.units, kWarpsPerBlock);
  if (ue8m0) {
    quantize_act_1x128_kernel<U, true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    quantize_act_1x128_kernel<U, false><<<grid, kThreads, 0, stream>>>(p);
  }
}

}  // namespace

void quantize_act_1x128(const void* x, int64_t ldx, int64_t m, int64_t k, void* q, int64_t ldq,
                        float* sa, bool ue8m0, cudaStream_t stream) {
  validate("moekit::quantize_act_1x128", "m", x, "x", ldx, m, k, q, ldq, sa, "sa");
  if (m == 0) return;

  ActParams p{};
  p.x = static_cast<const uint16_t*>(x);
  p.ldx = ldx;
  p.q = static_cast<uint8_t*>(q);
  p.ldq = ldq;
  p.sa = sa;
  p.sa_ld = sfa_ld(m);
  p.k = static_cast<int>(k);
  p.groups = static_cast<int>(ceil_div(k, kQuantBlock));
  // Group pairs per warp: 4 (64 bytes in flight per lane, least per-unit overhead) when that still
  // gives several waves of warps, else 2, else 1 (more warps for small inputs). A wave here is
  // 132 SMs x 32 resident warps (H100 SXM; only a performance heuristic).
  constexpr int64_t kWave = 132 * 32;
  if (m * ceil_div(p.groups, 8) >= 4 * kWave) {
    launch_act<4>(p, m, ue8m0, stream);
  } else if (m * ceil_div(p.groups, 4) >= 2 * kWave) {
    launch_act<2>(p, m, ue8m0, stream);
  } else {
    launch_act<1>(p, m, ue8m0, stream);
  }
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void quantize_weight_128x128(const void* w, int64_t ldw, int64_t n, int64_t k, void* q, int64_t ldq,
                             float* sb, bool ue8m0, cudaStream_t stream) {
  validate("moekit::quantize_weight_128x128", "n", w, "w", ldw, n, k, q, ldq, sb, "sb");
  if (n == 0) return;

  WeightParams p{};
  p.w = static_cast<const uint16_t*>(w);
  p.ldw = ldw;
  p.q = static_cast<uint8_t*>(q);
  p.ldq = ldq;
  p.sb = sb;
  p.n = n;
  p.k = static_cast<int>(k);
  p.kblocks = static_cast<int>(ceil_div(k, kQuantBlock));
  p.blocks = ceil_div(n, kQuantBlock) * p.kblocks;
  const int grid = grid_for(p.blocks, 1);
  if (ue8m0) {
    quantize_weight_128x128_kernel<true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    quantize_weight_128x128_kernel<false><<<grid, kThreads, 0, stream>>>(p);
  }
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit
