// moekit — activation permutation with per-token 1x128 quantization: permute_quantize_by_token and
// permute_quantize (include/moekit/moe_permute.h, SPEC §4) and their internal forms (moe_permute.h).
//
// permute_quantize_by_token (one launch): one warp per (token, chunk of 2U 128-column groups),
//   exactly the warp "unit" of quantize_act_unit (kernels/sm90/quantize_device.h): the same loads,
//   the same amax (amax8 + half-warp xor-shuffle max), the same block_scale and quant8, so codes and
//   scales are the bits of quantize_act_1x128. The unit is quantized once in registers and stored
//   to every permuted row of the token, r_j = expanded_to_permuted[t * k + j] (j < k; -1 and rows
//   outside [0, rows_bound) are skipped): the FP8 codes as 8-byte stores (256 contiguous bytes per
//   warp store and row), the scales sa_perm[g * sfa_ld(rows_bound) + r_j] by lane j of each half
//   warp (one store instruction covers up to 16 rows). x is read once (L1 no-allocate), nothing
//   goes through a scratch buffer.
//
// permute_quantize (the older two-launch path, kept for its callers):
//   1. quantize  each token once, x [T, H] bf16 → xq [T, H] FP8 + sx [T, ceil(H/128)] (logical
//                layout), with the very device routine of quantize_act_1x128
//                (kernels/sm90/quantize_device.h), so the bits are the same.
//   2. gather    one CTA per 32 permuted rows: the row's token t = permuted_to_expanded[r] / k (rows
//                with -1, or an index outside [0, T*k), are skipped); one warp per row copies
//                xq[t] to a_perm[r] in 16-byte vectors (four loads in flight per lane), then the CTA
//                writes the scales sa_perm[g * sfa_ld(rows_bound) + r] = sx[t, g], 32 consecutive
//                rows per K block (128-byte coalesced stores).
//   H % 16 == 0 (16-byte rows, as the GEMM's TMA needs); H need not be a multiple of 128 (the last
//   block gets its own scale over its valid columns). x, xq, sx, a_perm and sa_perm must be 16-byte
//   aligned.
#include <climits>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

#include "common/check.h"
#include "kernels/sm90/quantize_device.h"
#include "moe/moe_permute.h"
#include "moekit/moe_permute.h"
#include "moe/moe_sort_launch.h"
#include "moe/quantize_scatter_device.cuh"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"
#include "ptx/ptx.cuh"
#include "runtime/pdl.h"

namespace moekit {
namespace {

using detail::QuantUnit;
using detail::quantize_unit;
using detail::scatter_unit;
using detail::ScatterParams;
using namespace detail::sort_launch;

constexpr int kGatherRows = 32;    // permuted rows per gather CTA

// ---------------------------------------------------------------------------------------------
// permute_quantize kernels
// ---------------------------------------------------------------------------------------------

struct TokenQuantParams {
  const uint16_t* x;  // [T, H] bf16
  uint8_t* xq;        // [T, H] FP8
  float* sx;          // [T, groups]
  int64_t units;      // T * chunks_per_row
  int hidden;
  int groups;          // ceil(H / 128)
  int chunks_per_row;  // ceil(groups / (2 U))
};

template <int U, bool kUe8m0>
__global__ void __launch_bounds__(kThreads) quantize_tokens_kernel(const TokenQuantParams p) {
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  for (int64_t unit = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5); unit < p.units; unit += warps) {
    const int64_t row = unit / p.chunks_per_row;
    const int chunk = static_cast<int>(unit - row * p.chunks_per_row);
    sm90::quant::quantize_act_unit<U, kUe8m0>(p.x + row * p.hidden, p.xq + row * p.hidden, p.sx + row * p.groups,
                                              1, p.hidden, p.groups, chunk);
  }
}

struct GatherParams {
  const uint8_t* xq;
  const float* sx;
  const int32_t* permuted_to_expanded;
  uint8_t* a_perm;
  float* sa_perm;
  int64_t rows;      // rows_bound
  int64_t sa_ld;     // sfa_ld(rows_bound)
  int64_t slots;     // T * k: valid expanded indices are [0, slots)
  int64_t vectors;   // H / 16
  int64_t hidden;
  int top_k;
  int groups;
};

__global__ void __launch_bounds__(kThreads) gather_rows_kernel(const GatherParams p) {
  __shared__ int32_t token[kGatherRows];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  for (int64_t base = int64_t(blockIdx.x) * kGatherRows; base < p.rows; base += int64_t(gridDim.x) * kGatherRows) {
    if (threadIdx.x < kGatherRows) {
      const int64_t r = base + threadIdx.x;
      int32_t t = -1;
      if (r < p.rows) {
        const int32_t idx = p.permuted_to_expanded[r];
        if (idx >= 0 && idx < p.slots) t = idx / p.top_k;
      }
      token[threadIdx.x] = t;
    }
    __syncthreads();

    // FP8 data: one warp per row, 16-byte vectors, four loads in flight per lane.
    for (int rr = warp; rr < kGatherRows; rr += kWarps) {
      const int32_t t = token[rr];
      if (t < 0) continue;
      const uint4* src = reinterpret_cast<const uint4*>(p.xq + int64_t(t) * p.hidden);
      uint4* dst = reinterpret_cast<uint4*>(p.a_perm + (base + rr) * p.hidden);
      for (int64_t v0 = lane; v0 < p.vectors; v0 += 4 * 32) {
        uint4 d[4] = {};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int64_t v = v0 + u * 32;
          if (v < p.vectors) d[u] = ptx::ld_chain(src + v);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int64_t v = v0 + u * 32;
          if (v < p.vectors) dst[v] = d[u];
        }
      }
    }

    // Scales: K block g of the 32 rows is 32 consecutive floats of sa_perm.
    for (int i = threadIdx.x; i < p.groups * kGatherRows; i += kThreads) {
      const int g = i / kGatherRows;
      const int rr = i % kGatherRows;
      const int32_t t = token[rr];
      if (t >= 0) p.sa_perm[int64_t(g) * p.sa_ld + base + rr] = ptx::ld_chain(p.sx + int64_t(t) * p.groups + g);
    }
    __syncthreads();  // `token` is rewritten by the next iteration
  }
}

// PDL (runtime/pdl.h): the warp's first unit is read and quantized before waiting for the previous
// kernel (moe_sort, whose maps the scatter needs). x is the layer's input, complete before the
// chain's first kernel started, so this read cannot race; every write happens after the wait.
template <int U, bool kUe8m0>
__global__ void __launch_bounds__(kThreads) quantize_scatter_kernel(const ScatterParams p) {
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  int64_t unit = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  QuantUnit<U> qu;
  int64_t row = 0;
  int chunk = 0;
  if (unit < p.units) {
    row = unit / p.chunks_per_row;
    chunk = static_cast<int>(unit - row * p.chunks_per_row);
    quantize_unit<U, kUe8m0>(p, row, chunk, qu);
  }
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();
  if (blockIdx.x == 0)
    for (int i = int(threadIdx.x); i < p.num_zero_u32; i += kThreads) p.zero_u32[i] = 0u;
  for (bool first = true; unit < p.units; unit += warps, first = false) {
    if (!first) {
      row = unit / p.chunks_per_row;
      chunk = static_cast<int>(unit - row * p.chunks_per_row);
      quantize_unit<U, kUe8m0>(p, row, chunk, qu);
    }
    scatter_unit<U>(p, row, chunk, qu);
  }
}

// Fills sa_perm in row order from the token-major scales that quantize_scatter_kernel stored once
// per token (ScatterParams::sa_token). Thread i takes permuted row i % rows and the 8 K blocks
// [8c, 8c + 8) of c = i / rows: one 32-byte read of its token's scales, then 8 stores, each a
// 128-byte line over a warp's 32 consecutive rows. Rows without a slot (padding) are not written, as
// with the per-slot stores. PDL: every access after the wait.
struct ScaleGatherParams {
  const float* sx;                      // [T, groups]
  const int32_t* permuted_to_expanded;  // [rows]
  float* sa_perm;
  int64_t rows;   // rows_bound
  int64_t sa_ld;  // sfa_ld(rows_bound)
  int64_t slots;  // T * k: valid expanded indices are [0, slots)
  int top_k;
  int groups;
};

constexpr int kScaleChunk = 8;  // K blocks per thread of gather_scales_kernel

__global__ void __launch_bounds__(kThreads) gather_scales_kernel(const ScaleGatherParams p) {
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();
  const int64_t work = p.rows * ((p.groups + kScaleChunk - 1) / kScaleChunk);
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < work; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i % p.rows;
    const int g0 = static_cast<int>(i / p.rows) * kScaleChunk;
    const int32_t idx = p.permuted_to_expanded[r];
    if (idx < 0 || idx >= p.slots) continue;
    const float* src = p.sx + int64_t(idx / p.top_k) * p.groups;
    float v[kScaleChunk];
#pragma unroll
    for (int u = 0; u < kScaleChunk; ++u) v[u] = g0 + u < p.groups ? src[g0 + u] : 0.0f;
#pragma unroll
    for (int u = 0; u < kScaleChunk; ++u)
      if (g0 + u < p.groups) p.sa_perm[int64_t(g0 + u) * p.sa_ld + r] = v[u];
  }
}

}  // namespace

void permute_quantize(const void* x, int64_t num_tokens, int64_t hidden, int top_k, const int32_t* permuted_to_expanded,
                      int64_t rows_bound, void* xq, float* sx, void* a_perm, float* sa_perm, bool ue8m0,
                      cudaStream_t stream) {
  constexpr const char* fn = "moekit::permute_quantize";
  MOEKIT_REQUIRE(num_tokens >= 0 && num_tokens <= INT32_MAX, ErrorCode::kInvalidArgument, fn, ": num_tokens = ",
                 num_tokens, " must be in [0, 2^31)");
  MOEKIT_REQUIRE(hidden >= 16 && hidden % 16 == 0, ErrorCode::kInvalidArgument, fn, ": hidden = ", hidden,
                 " must be >= 16 and a multiple of 16");
  MOEKIT_REQUIRE(hidden <= (int64_t{1} << 30), ErrorCode::kInvalidArgument, fn, ": hidden = ", hidden,
                 " is too large (at most 2^30)");
  MOEKIT_REQUIRE(top_k >= 1, ErrorCode::kInvalidArgument, fn, ": top_k = ", top_k, " must be >= 1");
  MOEKIT_REQUIRE(rows_bound >= 0 && rows_bound <= INT32_MAX, ErrorCode::kInvalidArgument, fn, ": rows_bound = ",
                 rows_bound, " must be in [0, 2^31)");
  if (num_tokens > 0) {
    MOEKIT_REQUIRE(x && xq && sx, ErrorCode::kInvalidArgument, fn, ": x, xq and sx are required when num_tokens = ",
                   num_tokens, " > 0");
    if (rows_bound > 0) {
      MOEKIT_REQUIRE(permuted_to_expanded && a_perm && sa_perm, ErrorCode::kInvalidArgument, fn,
                     ": permuted_to_expanded, a_perm and sa_perm are required when rows_bound = ", rows_bound, " > 0");
    }
  }
  const std::pair<const void*, const char*> buffers[] = {
      {x, "x"}, {xq, "xq"}, {sx, "sx"}, {a_perm, "a_perm"}, {sa_perm, "sa_perm"}};
  for (const auto& [p, name] : buffers) {
    MOEKIT_REQUIRE(aligned_to(p, 16), ErrorCode::kMisaligned, fn, ": ", name, " (", p, ") must be 16-byte aligned");
  }
  MOEKIT_REQUIRE(aligned_to(permuted_to_expanded, 4), ErrorCode::kMisaligned, fn, ": permuted_to_expanded (",
                 static_cast<const void*>(permuted_to_expanded), ") must be 4-byte aligned");
  if (num_tokens == 0) return;  // no token, so no row to fill (permuted_to_expanded has no valid entry)

  const int groups = static_cast<int>(ceil_div(hidden, kQuantBlock));
  TokenQuantParams q{};
  q.x = static_cast<const uint16_t*>(x);
  q.xq = static_cast<uint8_t*>(xq);
  q.sx = sx;
  q.hidden = static_cast<int>(hidden);
  q.groups = groups;
  auto launch = [&](auto unroll) {
    constexpr int U = decltype(unroll)::value;
    q.chunks_per_row = static_cast<int>(ceil_div(groups, 2 * U));
    q.units = num_tokens * q.chunks_per_row;
    const int grid = grid_for(q.units, kWarps);
    if (ue8m0) {
      quantize_tokens_kernel<U, true><<<grid, kThreads, 0, stream>>>(q);
    } else {
      quantize_tokens_kernel<U, false><<<grid, kThreads, 0, stream>>>(q);
    }
  };
  sm90::quant::with_act_unroll(num_tokens, groups, launch);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
  if (rows_bound == 0) return;

  detail::gather_rows(xq, sx, permuted_to_expanded, num_tokens, hidden, top_k, rows_bound, a_perm, sa_perm, stream);
}

void detail::gather_rows(const void* xq, const float* sx, const int32_t* permuted_to_expanded, int64_t num_tokens,
                         int64_t hidden, int top_k, int64_t rows_bound, void* a_perm, float* sa_perm,
                         cudaStream_t stream) {
  if (num_tokens == 0 || rows_bound == 0) return;
  GatherParams g{};
  g.xq = static_cast<const uint8_t*>(xq);
  g.sx = sx;
  g.permuted_to_expanded = permuted_to_expanded;
  g.a_perm = static_cast<uint8_t*>(a_perm);
  g.sa_perm = sa_perm;
  g.rows = rows_bound;
  g.sa_ld = sfa_ld(rows_bound);
  g.slots = num_tokens * top_k;
  g.vectors = hidden / 16;
  g.hidden = hidden;
  g.top_k = top_k;
  g.groups = static_cast<int>(ceil_div(hidden, kQuantBlock));
  gather_rows_kernel<<<grid_for(rows_bound, kGatherRows), kThreads, 0, stream>>>(g);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void permute_quantize_by_token(const void* x, int64_t num_tokens, int64_t hidden, int top_k,
                               const int32_t* expanded_to_permuted, int64_t rows_bound, void* a_perm, float* sa_perm,
                               bool ue8m0, cudaStream_t stream) {
  MOEKIT_REQUIRE(expanded_to_permuted || num_tokens == 0 || rows_bound == 0, ErrorCode::kInvalidArgument,
                 "moekit::permute_quantize_by_token: expanded_to_permuted is required when num_tokens = ", num_tokens,
                 " > 0 and rows_bound = ", rows_bound, " > 0");
  detail::permute_quantize_by_token_zeroing(x, num_tokens, hidden, top_k, expanded_to_permuted, rows_bound, a_perm,
                                            sa_perm, ue8m0, nullptr, stream);
}

void detail::quantize_tokens_zeroing(const void* x, int64_t num_tokens, int64_t hidden, void* xq, float* sx,
                                     float* zero_acc, cudaStream_t stream, unsigned* zero_u32, int num_zero_u32) {
  MOEKIT_REQUIRE(x && xq && sx, ErrorCode::kInvalidArgument, "moekit::detail::quantize_tokens_zeroing: x, xq and sx "
                 "are required");
  permute_quantize_by_token_zeroing(x, num_tokens, hidden, 1, nullptr, num_tokens, xq, sx, false, zero_acc, stream,
                                    zero_u32, num_zero_u32);
}

bool detail::scatter_params(const char* fn, const void* x, int64_t num_tokens, int64_t hidden, int top_k,
                            const int32_t* expanded_to_permuted, int64_t rows_bound, void* a_perm, float* sa_perm,
                            float* zero_acc, unsigned* zero_u32, int num_zero_u32, ScatterParams& q) {
  MOEKIT_REQUIRE(num_zero_u32 >= 0 && (num_zero_u32 == 0 || zero_u32), ErrorCode::kInvalidArgument, fn,
                 ": num_zero_u32 = ", num_zero_u32, " must be >= 0, with a buffer when > 0");
  MOEKIT_REQUIRE(num_tokens >= 0 && num_tokens <= INT32_MAX, ErrorCode::kInvalidArgument, fn, ": num_tokens = ",
                 num_tokens, " must be in [0, 2^31)");
  MOEKIT_REQUIRE(hidden >= 16 && hidden % 16 == 0, ErrorCode::kInvalidArgument, fn, ": hidden = ", hidden,
                 " must be >= 16 and a multiple of 16");
  MOEKIT_REQUIRE(hidden <= (int64_t{1} << 30), ErrorCode::kInvalidArgument, fn, ": hidden = ", hidden,
                 " is too large (at most 2^30)");
  MOEKIT_REQUIRE(top_k >= 1, ErrorCode::kInvalidArgument, fn, ": top_k = ", top_k, " must be >= 1");
  MOEKIT_REQUIRE(num_tokens * top_k <= INT32_MAX, ErrorCode::kInvalidArgument, fn, ": num_tokens * top_k = ",
                 num_tokens, " * ", top_k, " must be < 2^31");
  MOEKIT_REQUIRE(rows_bound >= 0 && rows_bound <= INT32_MAX, ErrorCode::kInvalidArgument, fn, ": rows_bound = ",
                 rows_bound, " must be in [0, 2^31)");
  // Token mode (internal, quantize_tokens_zeroing): no map, rows_bound == num_tokens.
  const bool token_mode = expanded_to_permuted == nullptr && top_k == 1 && rows_bound == num_tokens;
  if (num_tokens > 0 && rows_bound > 0) {
    MOEKIT_REQUIRE(x && (expanded_to_permuted || token_mode) && a_perm && sa_perm, ErrorCode::kInvalidArgument, fn,
                   ": x, expanded_to_permuted, a_perm and sa_perm are required when num_tokens = ", num_tokens,
                   " > 0 and rows_bound = ", rows_bound, " > 0");
  }
  const std::pair<const void*, const char*> buffers[] = {{x, "x"}, {a_perm, "a_perm"}, {sa_perm, "sa_perm"}};
  for (const auto& [p, name] : buffers) {
    MOEKIT_REQUIRE(aligned_to(p, 16), ErrorCode::kMisaligned, fn, ": ", name, " (", p, ") must be 16-byte aligned");
  }
  MOEKIT_REQUIRE(aligned_to(expanded_to_permuted, 4), ErrorCode::kMisaligned, fn, ": expanded_to_permuted (",
                 static_cast<const void*>(expanded_to_permuted), ") must be 4-byte aligned");
  MOEKIT_REQUIRE(aligned_to(zero_acc, 16), ErrorCode::kMisaligned, fn, ": zero_acc must be 16-byte aligned");
  if (num_tokens == 0 || (rows_bound == 0 && !zero_acc && num_zero_u32 == 0)) return false;  // nothing to write

  q = ScatterParams{};
  q.x = static_cast<const uint16_t*>(x);
  q.expanded_to_permuted = expanded_to_permuted;
  q.a_perm = static_cast<uint8_t*>(a_perm);
  q.sa_perm = sa_perm;
  q.rows = rows_bound;
  q.sa_ld = sfa_ld(rows_bound);
  q.hidden = static_cast<int>(hidden);
  q.groups = static_cast<int>(ceil_div(hidden, kQuantBlock));
  q.top_k = top_k;
  q.zero_acc = zero_acc;
  q.zero_u32 = zero_u32;
  q.num_zero_u32 = num_zero_u32;
  return true;
}

void detail::set_scatter_unroll(ScatterParams& q, int64_t num_tokens, int unroll) {
  q.chunks_per_row = static_cast<int>(ceil_div(q.groups, 2 * unroll));
  q.units = num_tokens * q.chunks_per_row;
}

void detail::permute_quantize_by_token_zeroing(const void* x, int64_t num_tokens, int64_t hidden, int top_k,
                                               const int32_t* expanded_to_permuted, int64_t rows_bound, void* a_perm,
                                               float* sa_perm, bool ue8m0, float* zero_acc, cudaStream_t stream,
                                               unsigned* zero_u32, int num_zero_u32, const TokenScales& by_token) {
  ScatterParams q;
  if (!scatter_params("moekit::permute_quantize_by_token", x, num_tokens, hidden, top_k, expanded_to_permuted,
                      rows_bound, a_perm, sa_perm, zero_acc, zero_u32, num_zero_u32, q))
    return;
  const bool gather_scales = by_token.sx != nullptr && rows_bound > 0 && expanded_to_permuted != nullptr;
  if (gather_scales) {
    MOEKIT_REQUIRE(by_token.permuted_to_expanded, ErrorCode::kInvalidArgument,
                   "moekit::permute_quantize_by_token: token scales need permuted_to_expanded");
    MOEKIT_REQUIRE(aligned_to(by_token.sx, 16) && aligned_to(by_token.permuted_to_expanded, 4),
                   ErrorCode::kMisaligned, "moekit::permute_quantize_by_token: misaligned token scales or map");
    q.sa_token = by_token.sx;
  }
  const int groups = q.groups;
  auto launch = [&](auto unroll) {
    constexpr int U = decltype(unroll)::value;
    detail::set_scatter_unroll(q, num_tokens, U);
    const int grid = grid_for(q.units, kWarps);
    if (ue8m0) {
      detail::launch_pdl(quantize_scatter_kernel<U, true>, dim3(grid), dim3(kThreads), 0, stream, q);
    } else {
      detail::launch_pdl(quantize_scatter_kernel<U, false>, dim3(grid), dim3(kThreads), 0, stream, q);
    }
  };
  sm90::quant::with_act_unroll(num_tokens, groups, launch);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
  if (!gather_scales) return;
  ScaleGatherParams g{};
  g.sx = by_token.sx;
  g.permuted_to_expanded = by_token.permuted_to_expanded;
  g.sa_perm = sa_perm;
  g.rows = rows_bound;
  g.sa_ld = q.sa_ld;
  g.slots = num_tokens * top_k;
  g.top_k = top_k;
  g.groups = groups;
  const int64_t work = rows_bound * ceil_div(int64_t(groups), int64_t(kScaleChunk));
  detail::launch_pdl(gather_scales_kernel, dim3(grid_for(work, kThreads)), dim3(kThreads), 0, stream, g);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit
