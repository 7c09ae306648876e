// Merging attention partials: each thread one float4 of a row's o (a row's threads are 32, 64 or
// 128 by dim, so they tile the block), the sources' weights e^{lse_i + w_i − max} computed by every
// thread (the lse loads broadcast within the warp), the sources' rows loaded kUnroll at a time so
// their latencies overlap. Sources are summed in order, so the result does not depend on the
// thread mapping.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "attention/attention_merge.h"
#include "common/check.h"
#include "moekit/attention.h"
#include "ptx/ptx.cuh"
#include "runtime/pdl.h"

namespace moekit {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 4;
constexpr int64_t kMaxBlocks = 1 << 20;

struct MergeArgs {
  const float* o_parts;
  const float* lse_parts;
  int num_sources;
  int64_t source_stride, rows;
  int heads, dim, row_threads;
  const float* weight_logits;
  const float* sink;
  __nv_bfloat16* o_bf16;
  float* o_f32;
  float* lse_out;
};

// Row `row`, column group `col` of its row_threads.
__device__ __forceinline__ void merge_row(const MergeArgs& m, int64_t row, int col) {
  const float* __restrict__ o_parts = m.o_parts;
  const float* __restrict__ lse_parts = m.lse_parts;
  const float* __restrict__ weight_logits = m.weight_logits;
  const int num_sources = m.num_sources, heads = m.heads, dim = m.dim, row_threads = m.row_threads;
  const int64_t source_stride = m.source_stride;
  float* o_f32 = m.o_f32;
  __nv_bfloat16* o_bf16 = m.o_bf16;
  const int h = int(row % heads);
  // lse_i + w_i; −inf for a source that attended nothing (skipped everywhere: its weight, even
  // +inf, and its o are never read).
  const auto logit = [&](int i) {
    const float l = lse_parts[i * source_stride + row];
    if (l == -INFINITY) return -INFINITY;
    return l + (weight_logits != nullptr ? weight_logits[int64_t(i) * heads + h] : 0.0f);
  };
  float mx = -INFINITY;
  for (int i = 0; i < num_sources; ++i) mx = fmaxf(mx, logit(i));
  const int vecs = dim / 4;
  if (mx == -INFINITY) {  // nothing attended in any source
    for (int v = col; v < vecs; v += row_threads) {
      if (o_f32 != nullptr) reinterpret_cast<float4*>(o_f32 + row * dim)[v] = make_float4(0, 0, 0, 0);
      else reinterpret_cast<uint2*>(o_bf16 + row * dim)[v] = make_uint2(0, 0);
    }
    if (m.lse_out != nullptr && col == 0) m.lse_out[row] = -INFINITY;
    return;
  }
  float sum = 0.0f;
  for (int i = 0; i < num_sources; ++i) {
    const float l = logit(i);
    if (l != -INFINITY) sum += expf(l - mx);
  }
  const float inv_denom = 1.0f / (sum + (m.sink != nullptr ? expf(m.sink[h] - mx) : 0.0f));
  const auto weighted = [&](int i, int v, float& a, float4& x) {
    const float l = logit(i);
    const bool live = l != -INFINITY;
    a = live ? expf(l - mx) * inv_denom : 0.0f;
    x = live ? reinterpret_cast<const float4*>(o_parts + (i * source_stride + row) * dim)[v] : make_float4(0, 0, 0, 0);
  };
  const auto add = [](float4& acc, float a, const float4& x) {
    acc.x += a * x.x;
    acc.y += a * x.y;
    acc.z += a * x.z;
    acc.w += a * x.w;
  };
  for (int v = col; v < vecs; v += row_threads) {
    float4 acc = make_float4(0, 0, 0, 0);
    int i = 0;
    for (; i + kUnroll <= num_sources; i += kUnroll) {
      float a[kUnroll];
      float4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) weighted(i + u, v, a[u], x[u]);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) add(acc, a[u], x[u]);
    }
    for (; i < num_sources; ++i) {
      float a;
      float4 x;
      weighted(i, v, a, x);
      add(acc, a, x);
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
  if (m.lse_out != nullptr && col == 0) m.lse_out[row] = mx + logf(sum);
}

// Rows grid-strided (a launch of at most kMaxBlocks blocks covers any row count). Launched as a
// PDL dependent of the kernel that writes the partials (sparse_attention), it waits for it first.
__global__ void __launch_bounds__(kThreads) merge_kernel(const MergeArgs m) {
  ptx::griddep_wait();  // (no early launch of dependents: whatever follows sees the finished merge)
  const int64_t per_block = kThreads / m.row_threads;
  const int col = int(threadIdx.x) % m.row_threads;
  for (int64_t row = int64_t(blockIdx.x) * per_block + threadIdx.x / m.row_threads; row < m.rows;
       row += int64_t(gridDim.x) * per_block)
    merge_row(m, row, col);
}

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

namespace detail {

void launch_attention_merge(const float* o_partials, const float* lse_partials, int num_sources,
                            int64_t source_stride, int64_t rows, int heads, int dim, const float* weight_logits,
                            const float* sink, void* o_bf16, float* o_f32, float* lse, cudaStream_t stream) {
  if (rows == 0) return;
  // A row's threads: its float4s rounded up to 32, 64 or 128 (whole warps that tile the block).
  const int vecs = dim / 4;
  const int row_threads = vecs <= 32 ? 32 : vecs <= 64 ? 64 : kThreads;
  const int64_t rows_per_block = kThreads / row_threads;
  const int64_t blocks = std::min(kMaxBlocks, (rows + rows_per_block - 1) / rows_per_block);
  const MergeArgs m{o_partials, lse_partials, num_sources, source_stride, rows, heads, dim, row_threads,
                    weight_logits, sink, static_cast<__nv_bfloat16*>(o_bf16), o_f32, lse};
  launch_pdl(merge_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, m);
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
