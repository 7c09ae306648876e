// The unfused baseline of bench attention (attention_unfused.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>

#include "baseline/attention_unfused.h"
#include "common/check.h"

namespace moekit::baseline {
namespace {

struct GatherArgs {
  const int32_t *topk_indices, *topk_lens, *window_indices, *window_lens, *token_request, *window_positions,
      *query_positions;
  int topk, window, dim, keys;
  int64_t num_requests, num_entries;
  const uint8_t* nope;
  const float* scales;
  const __nv_bfloat16 *rope, *kv;
  int64_t nope_stride, scales_stride, rope_stride;  // bytes per entry
};

// One warp per (token, key): the dense bf16 key row (zero for no entry) and its bias (0 / −inf).
__global__ void gather_keys(GatherArgs a, int64_t tokens, __nv_bfloat16* k, float* bias) {
  const int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= tokens * a.keys) return;
  const int64_t t = w / a.keys;
  const int j = int(w % a.keys);
  int32_t e = -1;
  if (j < a.topk) {
    const int len = a.topk_lens ? min(max(a.topk_lens[t], 0), a.topk) : a.topk;
    if (j < len) e = a.topk_indices[t * a.topk + j];
  } else if (j < a.topk + a.window) {
    const int64_t r = a.token_request ? a.token_request[t] : t;
    const int i = j - a.topk;
    if (r >= 0 && r < a.num_requests) {
      const int len = a.window_lens ? min(max(a.window_lens[r], 0), a.window) : a.window;
      if (i < len) e = a.window_indices[r * a.window + i];
      if (e >= 0 && a.window_positions && a.window_positions[r * a.window + i] > a.query_positions[t]) e = -1;
    }
  }
  if (e >= a.num_entries) e = -1;
  __nv_bfloat16* row = k + w * a.dim;
  for (int d = lane; d < a.dim; d += 32) {
    float v = 0.0f;
    if (e >= 0) {
      if (a.nope != nullptr) {
        if (d < 448) {
          const __half_raw h = __nv_cvt_fp8_to_halfraw(a.nope[e * a.nope_stride + d], __NV_E4M3);
          const float* scales = reinterpret_cast<const float*>(reinterpret_cast<const char*>(a.scales) + e * a.scales_stride);
          v = __half2float(__half(h)) * scales[d / 64];
        } else {
          v = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(reinterpret_cast<const char*>(a.rope) +
                                                                      e * a.rope_stride)[d - 448]);
        }
      } else {
        v = __bfloat162float(a.kv[int64_t(e) * a.dim + d]);
      }
    }
    row[d] = __float2bfloat16(v);
  }
  if (lane == 0) bias[w] = e >= 0 ? 0.0f : -INFINITY;
}

// One warp per (token, head) row of scores: p = e^{s − m} / (Σ e^{s − m} + e^{sink − m}), lse.
__global__ void softmax_rows(const __nv_bfloat16* s, const float* bias, int64_t rows, int heads, int keys,
                             float scale, const float* sink, __nv_bfloat16* p, float* lse) {
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* b = bias + (row / heads) * keys;
  const __nv_bfloat16* x = s + row * keys;
  float m = -INFINITY;
  for (int j = lane; j < keys; j += 32) m = fmaxf(m, __bfloat162float(x[j]) * scale + b[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  float sum = 0.0f;
  const float ref = m == -INFINITY ? 0.0f : m;
  for (int j = lane; j < keys; j += 32) sum += __expf(__bfloat162float(x[j]) * scale + b[j] - ref);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
  const float denom = sum + (sink != nullptr && sum > 0.0f ? __expf(sink[row % heads] - ref) : 0.0f);
  const float inv = sum > 0.0f ? 1.0f / denom : 0.0f;
  for (int j = lane; j < keys; j += 32)
    p[row * keys + j] = __float2bfloat16(__expf(__bfloat162float(x[j]) * scale + b[j] - ref) * inv);
  if (lse != nullptr && lane == 0) lse[row] = sum > 0.0f ? ref + logf(sum) : -INFINITY;
}

unsigned warps_grid(int64_t warps) { return static_cast<unsigned>((warps * 32 + 255) / 256); }

}  // namespace

UnfusedSparseAttention::UnfusedSparseAttention(int64_t num_tokens, int heads, int dim, int keys_per_token)
    : tokens_(num_tokens),
      heads_(heads),
      dim_(dim),
      keys_((keys_per_token + 7) / 8 * 8),
      k_(size_t(num_tokens) * keys_ * dim * 2),
      bias_(size_t(num_tokens) * keys_ * 4),
      s_(size_t(num_tokens) * heads * keys_ * 2),
      p_(size_t(num_tokens) * heads * keys_ * 2) {}

LtStatus UnfusedSparseAttention::run(const SparseAttentionArgs& a, const AttentionKv& kv, void* o, float* lse,
                                     cudaStream_t stream) {
  MOEKIT_REQUIRE(a.num_tokens <= tokens_ && a.heads == heads_ && a.dim == dim_ && a.topk + a.window <= keys_,
                 ErrorCode::kInvalidArgument, "UnfusedSparseAttention::run: shape differs from the buffers'");
  if (a.num_tokens == 0) return LtStatus::success();
  const bool mixed = kv.format == KvFormat::kMixedFp8;
  GatherArgs g{a.topk_indices, a.topk_lens, a.window_indices, a.window_lens, a.token_request, a.window_positions,
               a.query_positions, a.topk, a.window_indices ? a.window : 0, dim_, keys_,
               a.token_request ? a.num_requests : a.num_tokens, mixed ? kv.mixed.num_entries : kv.num_entries,
               mixed ? kv.mixed.nope : nullptr, kv.mixed.scales,
               static_cast<const __nv_bfloat16*>(kv.mixed.rope), static_cast<const __nv_bfloat16*>(kv.bf16),
               kv.mixed.nope_stride, kv.mixed.scales_stride, kv.mixed.rope_stride};
  gather_keys<<<warps_grid(a.num_tokens * keys_), 256, 0, stream>>>(g, a.num_tokens, k_.as<__nv_bfloat16>(),
                                                                     bias_.as<float>());
  MOEKIT_CUDA_CHECK(cudaGetLastError());
  GemmBf16Args qk;  // S[t] = Q[t] · K[t]ᵀ
  qk.m = heads_, qk.n = keys_, qk.k = dim_;
  qk.a = a.q, qk.lda = dim_, qk.b = k_.get(), qk.ldb = dim_, qk.d = s_.get(), qk.ldd = keys_;
  qk.batch = a.num_tokens, qk.stride_a = int64_t(heads_) * dim_, qk.stride_b = int64_t(keys_) * dim_;
  qk.stride_d = int64_t(heads_) * keys_;
  if (LtStatus st = lt_.gemm_bf16(qk, stream); !st) return st;
  const int64_t rows = a.num_tokens * heads_;
  softmax_rows<<<warps_grid(rows), 256, 0, stream>>>(s_.as<__nv_bfloat16>(), bias_.as<float>(), rows, heads_, keys_,
                                                    a.softmax_scale, a.sink, p_.as<__nv_bfloat16>(), lse);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
  GemmBf16Args pv;  // O[t] = P[t] · K[t]
  pv.m = heads_, pv.n = dim_, pv.k = keys_;
  pv.a = p_.get(), pv.lda = keys_, pv.b = k_.get(), pv.ldb = dim_, pv.d = o, pv.ldd = dim_, pv.b_kn = true;
  pv.batch = a.num_tokens, pv.stride_a = int64_t(heads_) * keys_, pv.stride_b = int64_t(keys_) * dim_;
  pv.stride_d = int64_t(heads_) * dim_;
  return lt_.gemm_bf16(pv, stream);
}

}  // namespace moekit::baseline
