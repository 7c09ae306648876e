// Merging attention partials: one warp per (token, head) row, the sources' weights e^{lse_i + w_i −
// max} computed by every lane, then the weighted sum of the rows' o, 4 dims per lane at a time.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "attention/attention_merge.h"
#include "common/check.h"
#include "moekit/attention.h"

namespace moekit {
namespace {

constexpr int kWarps = 8;

__global__ void __launch_bounds__(32 * kWarps)
    merge_kernel(const float* __restrict__ o_parts, const float* __restrict__ lse_parts, int num_sources,
                 int64_t source_stride, int64_t rows, int heads, int dim, const float* __restrict__ weight_logits,
                 const float* __restrict__ sink, __nv_bfloat16* __restrict__ o_bf16, float* __restrict__ o_f32,
                 float* __restrict__ lse_out) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int h = int(row % heads);
  // A source with lse = −inf attended nothing: skipped everywhere (its weight, even +inf, unread).
  float mx = -INFINITY;
  for (int i = 0; i < num_sources; ++i) {
    const float l = lse_parts[i * source_stride + row];
    if (l == -INFINITY) continue;
    const float w = weight_logits != nullptr ? weight_logits[int64_t(i) * heads + h] : 0.0f;
    mx = fmaxf(mx, l + w);
  }
  const int vecs = dim / 4;
  if (mx == -INFINITY) {  // nothing attended in any source
    for (int v = lane; v < vecs; v += 32) {
      if (o_f32 != nullptr) reinterpret_cast<float4*>(o_f32 + row * dim)[v] = make_float4(0, 0, 0, 0);
      else reinterpret_cast<uint2*>(o_bf16 + row * dim)[v] = make_uint2(0, 0);
    }
    if (lse_out != nullptr && lane == 0) lse_out[row] = -INFINITY;
    return;
  }
  float sum = 0.0f;
  for (int i = 0; i < num_sources; ++i) {
    const float l = lse_parts[i * source_stride + row];
    if (l == -INFINITY) continue;
    const float w = weight_logits != nullptr ? weight_logits[int64_t(i) * heads + h] : 0.0f;
    sum += expf(l + w - mx);
  }
  const float denom = sum + (sink != nullptr ? expf(sink[h] - mx) : 0.0f);
  for (int v = lane; v < vecs; v += 32) {
    float4 acc = make_float4(0, 0, 0, 0);
    for (int i = 0; i < num_sources; ++i) {
      const float l = lse_parts[i * source_stride + row];
      if (l == -INFINITY) continue;  // an empty source: its o is never read
      const float w = weight_logits != nullptr ? weight_logits[int64_t(i) * heads + h] : 0.0f;
      const float a = expf(l + w - mx) / denom;
      const float4 x = reinterpret_cast<const float4*>(o_parts + (i * source_stride + row) * dim)[v];
      acc.x += a * x.x;
      acc.y += a * x.y;
      acc.z += a * x.z;
      acc.w += a * x.w;
    }
    if (o_f32 != nullptr) {
      reinterpret_cast<float4*>(o_f32 + row * dim)[v] = acc;
    } else {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x, acc.y), hi = __floats2bfloat162_rn(acc.z, acc.w);
      uint2 packed;
      packed.x = *reinterpret_cast<const uint32_t*>(&lo);
      packed.y = *reinterpret_cast<const uint32_t*>(&hi);
      reinterpret_cast<uint2*>(o_bf16 + row * dim)[v] = packed;
    }
  }
  if (lse_out != nullptr && lane == 0) lse_out[row] = mx + logf(sum);
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

namespace detail {

void launch_attention_merge(const float* o_partials, const float* lse_partials, int num_sources,
                            int64_t source_stride, int64_t rows, int heads, int dim, const float* weight_logits,
                            const float* sink, void* o_bf16, float* o_f32, float* lse, cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  merge_kernel<<<static_cast<unsigned>(blocks), 32 * kWarps, 0, stream>>>(
      o_partials, lse_partials, num_sources, source_stride, rows, heads, dim, weight_logits, sink,
      static_cast<__nv_bfloat16*>(o_bf16), o_f32, lse);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

void attention_merge(const float* o_partials, const float* lse_partials, int num_sources, int64_t num_tokens,
                     int heads, int dim, const float* weight_logits, const float* sink, void* o, float* lse,
                     cudaStream_t stream) {
  const char* fn = "moekit::attention_merge";
  MOEKIT_REQUIRE(num_sources >= 1 && num_tokens >= 0 && heads >= 1, ErrorCode::kInvalidArgument, fn,
                 ": num_sources = ", num_sources, " must be >= 1, num_tokens = ", num_tokens, " >= 0, heads = ",
                 heads, " >= 1");
  MOEKIT_REQUIRE(dim >= 4 && dim % 4 == 0, ErrorCode::kInvalidArgument, fn, ": dim = ", dim,
                 " must be a positive multiple of 4");
  MOEKIT_REQUIRE(num_tokens < (int64_t(1) << 34) / heads, ErrorCode::kInvalidArgument, fn,
                 ": num_tokens * heads is too large");
  if (num_tokens == 0) return;
  MOEKIT_REQUIRE(o_partials && lse_partials && o, ErrorCode::kInvalidArgument, fn,
                 ": o_partials, lse_partials and o are required");
  MOEKIT_REQUIRE(aligned(o_partials, 16) && aligned(o, 8) && aligned(lse_partials, 4) && aligned(lse, 4) &&
                     aligned(weight_logits, 4) && aligned(sink, 4),
                 ErrorCode::kMisaligned, fn, ": o_partials must be 16-byte aligned, o 8-byte, the rest 4-byte");
  const int64_t rows = num_tokens * heads;
  detail::launch_attention_merge(o_partials, lse_partials, num_sources, rows, rows, heads, dim, weight_logits, sink,
                                 o, nullptr, lse, stream);
}

}  // namespace moekit
