// DeepSeek-V4 attention's cache writer and RoPE (include/moekit/attention.h).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "moekit/attention.h"
#include "planning/attention_plan.h"

namespace moekit {
namespace {

using C = MixedKvCache;
constexpr int kWarpsPerBlock = 8;

// The smallest 2^k ≥ amax / 448 (detail::mixed_kv_group_scale, the same float steps).
__device__ __forceinline__ float group_scale(float amax) {
  if (isnan(amax)) return __int_as_float(0x7FC00000);
  if (!(amax > 0.0f) || isinf(amax)) return 1.0f;  // frexpf(inf)'s exponent is unspecified
  int e = 0;
  const float m = frexpf(amax / 448.0f, &e);
  return m == 0.5f ? ldexpf(1.0f, e - 1) : ldexpf(1.0f, e);
}

// One warp per (token, group): groups 0..6 are the FP8 dims (two per lane, a warp-wide amax that
// keeps a NaN), group 7 copies the 64 rope dims.
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    mixed_kv_write_kernel(const __nv_bfloat16* __restrict__ k, int64_t num_tokens, int64_t ldk,
                          const int32_t* __restrict__ slots, C cache) {
  const int lane = threadIdx.x & 31;
  const int64_t units = num_tokens * (C::kScales + 1);
  for (int64_t u = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); u < units;
       u += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int64_t t = u / (C::kScales + 1);
    const int g = int(u - t * (C::kScales + 1));
    const int32_t slot = slots[t];
    if (slot < 0 || slot >= cache.num_entries) continue;  // uniform over the warp
    const __nv_bfloat162 v = reinterpret_cast<const __nv_bfloat162*>(k + t * ldk + g * C::kGroup)[lane];
    if (g == C::kScales) {
      reinterpret_cast<__nv_bfloat162*>(static_cast<char*>(cache.rope) + int64_t(slot) * cache.rope_stride)[lane] = v;
      continue;
    }
    const float2 f = __bfloat1622float2(v);
    float amax = (isnan(f.x) || isnan(f.y)) ? f.x + f.y : fmaxf(fabsf(f.x), fabsf(f.y));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xFFFFFFFFu, amax, o);
      amax = (isnan(amax) || isnan(other)) ? amax + other : fmaxf(amax, other);
    }
    const float s = group_scale(amax);
    const __nv_fp8x2_storage_t q = __nv_cvt_float2_to_fp8x2(make_float2(f.x / s, f.y / s), __NV_SATFINITE, __NV_E4M3);
    reinterpret_cast<__nv_fp8x2_storage_t*>(cache.nope + int64_t(slot) * cache.nope_stride + g * C::kGroup)[lane] = q;
    if (lane == 0)
      reinterpret_cast<float*>(reinterpret_cast<char*>(cache.scales) + int64_t(slot) * cache.scales_stride)[g] = s;
  }
}

// One thread per (token, head, pair of the 32 rope pairs).
__global__ void rope_kernel(__nv_bfloat16* __restrict__ x, int64_t num_tokens, int heads, int64_t dim,
                            const int32_t* __restrict__ positions, const float* __restrict__ cos,
                            const float* __restrict__ sin, int64_t max_positions, bool inverse) {
  constexpr int kPairs = C::kRope / 2;
  const int64_t n = num_tokens * heads * kPairs;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / kPairs;
    const int pair = int(i - row * kPairs);
    const int32_t p = positions[row / heads];
    if (p < 0 || p >= max_positions) continue;
    __nv_bfloat162* v = reinterpret_cast<__nv_bfloat162*>(x + row * dim + dim - C::kRope) + pair;
    const float2 ab = __bfloat1622float2(*v);
    const float c = cos[int64_t(p) * kPairs + pair], s = inverse ? -sin[int64_t(p) * kPairs + pair]
                                                                 : sin[int64_t(p) * kPairs + pair];
    *v = __floats2bfloat162_rn(fmaf(ab.x, c, -ab.y * s), fmaf(ab.x, s, ab.y * c));
  }
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

unsigned blocks_for(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(std::min<int64_t>((work + per_block - 1) / per_block, 132 * 16));
}

}  // namespace

void mixed_kv_cache_write(const void* k, int64_t num_tokens, int64_t ldk, const int32_t* slots,
                          const MixedKvCache& cache, cudaStream_t stream) {
  const char* fn = "moekit::mixed_kv_cache_write";
  MOEKIT_REQUIRE(num_tokens >= 0 && cache.num_entries >= 0, ErrorCode::kInvalidArgument, fn, ": num_tokens = ",
                 num_tokens, " and num_entries = ", cache.num_entries, " must be >= 0");
  if (num_tokens == 0 || cache.num_entries == 0) return;
  MOEKIT_REQUIRE(k && slots && cache.nope && cache.scales && cache.rope, ErrorCode::kInvalidArgument, fn,
                 ": k, slots and the cache's nope, scales and rope are required");
  MOEKIT_REQUIRE(ldk >= C::kNope + C::kRope && ldk % 8 == 0, ErrorCode::kInvalidArgument, fn, ": ldk = ", ldk,
                 " must be >= 512 and a multiple of 8");
  detail::validate_mixed_kv_strides(cache, fn);
  MOEKIT_REQUIRE(aligned(k, 16) && aligned(cache.rope, 16) && aligned(cache.nope, 2) && aligned(cache.scales, 4) &&
                     aligned(slots, 4),
                 ErrorCode::kMisaligned, fn, ": k and rope must be 16-byte aligned, nope 2-, scales and slots 4-byte");
  mixed_kv_write_kernel<<<blocks_for(num_tokens * (C::kScales + 1), kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
                          stream>>>(static_cast<const __nv_bfloat16*>(k), num_tokens, ldk, slots, cache);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void rope_inplace(void* x, int64_t num_tokens, int heads, int64_t dim, const int32_t* positions, const float* cos,
                  const float* sin, int64_t max_positions, bool inverse, cudaStream_t stream) {
  const char* fn = "moekit::rope_inplace";
  MOEKIT_REQUIRE(num_tokens >= 0 && heads >= 1 && dim >= C::kRope && dim % 8 == 0 && max_positions >= 0,
                 ErrorCode::kInvalidArgument, fn, ": num_tokens = ", num_tokens, ", heads = ", heads, ", dim = ", dim,
                 ", max_positions = ", max_positions, " (T >= 0, heads >= 1, dim >= 64 and a multiple of 8)");
  if (num_tokens == 0) return;
  MOEKIT_REQUIRE(x && positions && (max_positions == 0 || (cos && sin)), ErrorCode::kInvalidArgument, fn,
                 ": x, positions, cos and sin are required");
  MOEKIT_REQUIRE(aligned(x, 16) && aligned(positions, 4) && aligned(cos, 4) && aligned(sin, 4),
                 ErrorCode::kMisaligned, fn, ": x must be 16-byte aligned, positions, cos and sin 4-byte");
  const int64_t work = num_tokens * heads * (C::kRope / 2);
  rope_kernel<<<blocks_for(work, 256), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(x), num_tokens, heads, dim,
                                                        positions, cos, sin, max_positions, inverse);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit
