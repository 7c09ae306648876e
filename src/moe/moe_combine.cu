// Deterministic combine of the per-slot expert outputs into y (the unfused GEMM2 tail).
#include <cuda_bf16.h>

#include "common/check.h"
#include "moe/moe_combine_bias.h"
#include "moekit/moe_ops.h"
#include "ptx/ptx.cuh"

namespace moekit {
namespace {

constexpr int kThreads = 256;
constexpr int kColsPerThread = 8;  // one 16-byte bf16 vector

// Block (x, y): columns [x * 2048, +2048) of tokens y, y + gridDim.y, ... Each thread sums its 8
// columns over the token's slots in slot order, in FP32 (fmaf), and rounds once to bf16. With
// kBias each kept slot's row gets its expert's b2 first (detail::MoeCombineBias).
template <bool kBias>
__global__ void __launch_bounds__(kThreads) moe_combine_kernel(const __nv_bfloat16* __restrict__ d, int64_t ldd,
                                                               const int32_t* __restrict__ e2p,
                                                               const float* __restrict__ w, int64_t num_tokens,
                                                               int top_k, int64_t hidden,
                                                               __nv_bfloat16* __restrict__ y, int64_t ldy,
                                                               detail::MoeCombineBias bias) {
  const int64_t col = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * kColsPerThread;
  if (col >= hidden) return;
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    float acc[kColsPerThread];
#pragma unroll
    for (int i = 0; i < kColsPerThread; ++i) acc[i] = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      const int64_t slot = t * top_k + j;
      const int32_t row = ptx::ld_chain(e2p + slot);
      if (row < 0) continue;
      const float wt = ptx::ld_chain(w + slot);
      const uint4 raw = ptx::ld_chain(reinterpret_cast<const uint4*>(d + row * ldd + col));
      const __nv_bfloat162* v = reinterpret_cast<const __nv_bfloat162*>(&raw);
      float b[kColsPerThread] = {};
      if constexpr (kBias) {
        const float* src = bias.b2 + int64_t(ptx::ld_chain(bias.ids + slot) - bias.local_offset) * hidden + col;
#pragma unroll
        for (int i = 0; i < kColsPerThread; ++i) b[i] = src[i];
      }
#pragma unroll
      for (int i = 0; i < kColsPerThread / 2; ++i) {
        const float2 f = __bfloat1622float2(v[i]);
        acc[2 * i] = fmaf(wt, f.x + b[2 * i], acc[2 * i]);
        acc[2 * i + 1] = fmaf(wt, f.y + b[2 * i + 1], acc[2 * i + 1]);
      }
    }
    uint4 out;
    __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int i = 0; i < kColsPerThread / 2; ++i) o[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
    *reinterpret_cast<uint4*>(y + t * ldy + col) = out;
  }
}

// Block (x, y): columns [x * 2048, +2048) of slots y, y + gridDim.y, ...: one 16-byte copy per
// thread and kept slot.
__global__ void __launch_bounds__(kThreads) moe_rows_to_slots_kernel(const uint4* __restrict__ d, int64_t ldd16,
                                                                     const int32_t* __restrict__ e2p,
                                                                     int64_t slots, int64_t hidden16,
                                                                     uint4* __restrict__ out) {
  const int64_t col = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= hidden16) return;
  for (int64_t s = blockIdx.y; s < slots; s += gridDim.y) {
    const int32_t row = e2p[s];
    if (row >= 0) out[s * hidden16 + col] = d[row * ldd16 + col];
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void moe_combine(const void* d, int64_t ldd, const int32_t* expanded_to_permuted, const float* topk_weights,
                 int64_t num_tokens, int top_k, int64_t hidden, void* y, int64_t ldy, cudaStream_t stream) {
  detail::moe_combine_with_bias(d, ldd, expanded_to_permuted, topk_weights, num_tokens, top_k, hidden, y, ldy, stream,
                                detail::MoeCombineBias{});
}

void detail::moe_combine_with_bias(const void* d, int64_t ldd, const int32_t* expanded_to_permuted,
                                   const float* topk_weights, int64_t num_tokens, int top_k, int64_t hidden, void* y,
                                   int64_t ldy, cudaStream_t stream, const MoeCombineBias& bias) {
  constexpr const char* fn = "moekit::moe_combine";
  MOEKIT_REQUIRE(num_tokens >= 0, ErrorCode::kInvalidArgument, fn, ": num_tokens = ", num_tokens, " must be >= 0");
  MOEKIT_REQUIRE(top_k >= 1 && top_k <= 1024, ErrorCode::kInvalidArgument, fn, ": top_k = ", top_k,
                 " must be in [1, 1024]");
  MOEKIT_REQUIRE(hidden >= 8 && hidden % 8 == 0, ErrorCode::kInvalidArgument, fn, ": hidden = ", hidden,
                 " must be a positive multiple of 8");
  MOEKIT_REQUIRE(num_tokens * top_k < (int64_t(1) << 31), ErrorCode::kInvalidArgument, fn,
                 ": num_tokens * top_k must be < 2^31");
  if (num_tokens == 0) return;
  MOEKIT_REQUIRE(d && expanded_to_permuted && topk_weights && y, ErrorCode::kInvalidArgument, fn,
                 ": d, expanded_to_permuted, topk_weights and y are required");
  MOEKIT_REQUIRE(ldd >= hidden && ldd % 8 == 0 && ldy >= hidden && ldy % 8 == 0, ErrorCode::kMisaligned, fn,
                 ": ldd = ", ldd, " and ldy = ", ldy, " must be >= hidden and multiples of 8");
  MOEKIT_REQUIRE(aligned16(d) && aligned16(y), ErrorCode::kMisaligned, fn, ": d and y must be 16-byte aligned");
  MOEKIT_REQUIRE((reinterpret_cast<uintptr_t>(topk_weights) & 3u) == 0 &&
                     (reinterpret_cast<uintptr_t>(expanded_to_permuted) & 3u) == 0,
                 ErrorCode::kMisaligned, fn, ": expanded_to_permuted and topk_weights must be 4-byte aligned");
  const int64_t col_blocks = (hidden / kColsPerThread + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(num_tokens < 65535 ? num_tokens : 65535));
  MOEKIT_REQUIRE(!bias.b2 || bias.ids, ErrorCode::kInvalidArgument, fn, ": a bias needs the slots' expert ids");
  const auto kernel = bias.b2 ? moe_combine_kernel<true> : moe_combine_kernel<false>;
  kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(d), ldd, expanded_to_permuted, topk_weights,
                                        num_tokens, top_k, hidden, static_cast<__nv_bfloat16*>(y), ldy, bias);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void detail::moe_rows_to_slots(const void* d, int64_t ldd, const int32_t* expanded_to_permuted, int64_t num_tokens,
                               int top_k, int64_t hidden, void* out, cudaStream_t stream) {
  const int64_t slots = num_tokens * top_k;
  if (slots == 0) return;
  MOEKIT_REQUIRE(hidden % 8 == 0 && ldd % 8 == 0 && aligned16(d) && aligned16(out), ErrorCode::kMisaligned,
                 "moekit::detail::moe_rows_to_slots: hidden = ", hidden, " and ldd = ", ldd,
                 " must be multiples of 8, d and out 16-byte aligned");
  const int64_t h16 = hidden / 8;
  const dim3 grid(static_cast<unsigned>((h16 + kThreads - 1) / kThreads),
                  static_cast<unsigned>(slots < 65535 ? slots : 65535));
  moe_rows_to_slots_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const uint4*>(d), ldd / 8, expanded_to_permuted,
                                                          slots, h16, static_cast<uint4*>(out));
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit
