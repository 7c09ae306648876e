// moekit — GPU quantization kernels: bf16 → FP8 E4M3 with FP32 block scales (SPEC §1).
//
// Numerics: see kernels/sm90/quantize_device.h (shared with moe/moe_permute.cu), bit for bit the host
// quantizers of numerics.h.
//
// Activation kernel (1x128): each warp processes "units" = (row, chunk of 2*U consecutive
// 128-column groups) with quant::quantize_act_unit (quantize_device.h, which describes the lane
// mapping), writing the scales into the physical layout sa[kb * sfa_ld(m) + row]. U = 4, 2 or 1
// is picked on the host from the amount of work (quant::act_unroll_for).
//
// Weight kernel (128x128): one 256-thread CTA per block; each thread keeps 8 row segments of
// 8 bf16 in registers (thread t: column segment t % 16, rows t / 16 + 16 i), reduces the amax
// through the warp and shared memory, then quantizes from registers.
#include <cstdint>

#include <cuda_runtime.h>

#include "common/check.h"
#include "kernels/sm90/quantize_device.h"
#include "moekit/numerics.h"
#include "moekit/quantize.h"
#include "ptx/ptx_memory.cuh"

namespace moekit {
namespace {

constexpr int kThreads = 256;  // both kernels
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kMaxGrid = 1 << 20;  // grid-stride beyond this many CTAs

using namespace sm90::quant;

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
  const int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t unit = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); unit < p.units;
       unit += warps) {
    const int64_t row = unit / p.chunks_per_row;
    const int chunk = static_cast<int>(unit - row * p.chunks_per_row);
    quantize_act_unit<U, kUe8m0>(p.x + row * p.ldx, p.q + row * p.ldq, p.sa + row, p.sa_ld, p.k, p.groups,
                                 chunk);
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
        v[i] = ptx::ld_global_nc_no_allocate_v4(p.w + row * p.ldw + col);
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
  with_act_unroll(m, p.groups, [&](auto unroll) { launch_act<decltype(unroll)::value>(p, m, ue8m0, stream); });
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
