// The expert-parallel layer's kernels (ep_kernels.h).
#include "ep/ep_kernels.h"

#include <algorithm>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/check.h"
#include "moekit/numerics.h"

namespace moekit::detail {
namespace {

constexpr int kRouteThreads = 1024;

// One CTA walks the tokens in chunks of kRouteThreads (one token per thread). A token's
// destination set is the mask of ranks owning one of its valid ids; per rank, its row is either
// the token index (low latency) or its rank among that rank's tokens: an exclusive block scan per
// rank and chunk, carried across chunks.
__global__ void __launch_bounds__(kRouteThreads) ep_route_kernel(EpRouteArgs a) {
  using Scan = cub::BlockScan<int, kRouteThreads>;
  using Reduce = cub::BlockReduce<int, kRouteThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int carried[kEpMaxRanks];
  __shared__ int chunk_total;
  const int tid = int(threadIdx.x);
  const int per_rank = a.num_experts / a.world;
  if (tid < kEpMaxRanks) carried[tid] = 0;
  int invalid = 0;
  __syncthreads();
  for (int64_t base = 0; base < a.num_tokens; base += kRouteThreads) {
    const int64_t t = base + tid;
    const bool live = t < a.num_tokens;
    uint32_t mask = 0;
    if (live) {
      for (int j = 0; j < a.top_k; ++j) {
        const int32_t id = a.ids[t * a.top_k + j];
        const bool ok = id >= 0 && id < a.num_experts;
        invalid += (id < -1 || id >= a.num_experts) ? 1 : 0;
        if (ok) mask |= 1u << (id / per_rank);
        if (a.send_ids) {
          a.send_ids[t * a.top_k + j] = ok ? id : -1;
          a.send_weights[t * a.top_k + j] = a.weights[t * a.top_k + j];
        }
      }
    }
    int row_of[kEpMaxRanks];
    for (int p = 0; p < a.world; ++p) {
      const int flag = int((mask >> p) & 1u);
      int row = int(t);
      if (a.compact) {
        int excl = 0;
        Scan(scan_tmp).ExclusiveSum(flag, excl);
        if (tid == kRouteThreads - 1) chunk_total = excl + flag;
        __syncthreads();
        row = carried[p] + excl;
        __syncthreads();
        if (tid == 0) carried[p] += chunk_total;
        if (live) a.pos[t * a.world + p] = flag ? row : -1;
      }
      row_of[p] = flag ? row : -1;
      if (live && !a.deterministic) {
        a.combine_map[t * a.world + p] = flag ? int32_t(p * a.capacity + row) : -1;
        a.ones[t * a.world + p] = 1.0f;
      }
    }
    if (live && a.deterministic) {
      for (int j = 0; j < a.top_k; ++j) {
        const int32_t id = a.ids[t * a.top_k + j];
        int32_t m = -1;
        if (id >= 0 && id < a.num_experts) {
          const int p = id / per_rank;
          m = int32_t((p * a.capacity + row_of[p]) * a.top_k + j);
        }
        a.combine_map[t * a.top_k + j] = m;
      }
    }
    __syncthreads();
  }
  if (a.send_ids) {  // the padding rows of the low-latency block
    for (int64_t i = a.num_tokens * a.top_k + tid; i < a.capacity * a.top_k; i += kRouteThreads) {
      a.send_ids[i] = -1;
      a.send_weights[i] = 0.0f;
    }
  }
  const int total_invalid = Reduce(reduce_tmp).Sum(invalid);
  if (tid == 0 && a.invalid_count) *a.invalid_count = total_invalid;
  if (a.compact && tid < a.world) a.send_counts[tid] = carried[tid];
}

constexpr int kPackThreads = 128;

// Block b: tokens b, b + gridDim.x, ...; for each rank the token goes to, the block copies its FP8
// row (16 bytes a thread), its scales and its ids / weights into that rank's block.
__global__ void __launch_bounds__(kPackThreads)
    ep_pack_rows_kernel(const uint8_t* __restrict__ xq, const float* __restrict__ sxq, const int32_t* __restrict__ ids,
                        const float* __restrict__ weights, const int32_t* __restrict__ pos, int64_t num_tokens,
                        int64_t hidden, int top_k, int num_experts, int world, int64_t capacity,
                        uint8_t* __restrict__ send_x, float* __restrict__ send_sx, int32_t* __restrict__ send_ids,
                        float* __restrict__ send_w) {
  const int64_t kb_n = ceil_div(hidden, kQuantBlock);
  const int64_t ld = sfa_ld(num_tokens);
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    for (int p = 0; p < world; ++p) {
      const int32_t row = pos[t * world + p];
      if (row < 0) continue;
      const int64_t dst = int64_t(p) * capacity + row;
      const uint4* s = reinterpret_cast<const uint4*>(xq + t * hidden);
      uint4* d = reinterpret_cast<uint4*>(send_x + dst * hidden);
      for (int64_t c = threadIdx.x; c < hidden / 16; c += kPackThreads) d[c] = s[c];
      for (int64_t kb = threadIdx.x; kb < kb_n; kb += kPackThreads) send_sx[dst * kb_n + kb] = sxq[kb * ld + t];
      for (int j = int(threadIdx.x); j < top_k; j += kPackThreads) {
        const int32_t id = ids[t * top_k + j];
        send_ids[dst * top_k + j] = (id >= 0 && id < num_experts) ? id : -1;
        send_w[dst * top_k + j] = weights[t * top_k + j];
      }
    }
  }
}

__global__ void ep_copy_scales_kernel(const float* __restrict__ src, EpScaleLayout sl, float* __restrict__ dst,
                                      EpScaleLayout dl, int64_t rows, int64_t kb_n) {
  const int64_t n = rows * kb_n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t kb = i / rows, r = i - kb * rows;
    dst[kb * dl.kb_stride + r * dl.row_stride] = src[kb * sl.kb_stride + r * sl.row_stride];
  }
}

}  // namespace

void ep_route(const EpRouteArgs& a, cudaStream_t stream) {
  MOEKIT_REQUIRE(a.world >= 1 && a.world <= kEpMaxRanks && a.num_experts % a.world == 0 && a.top_k >= 1 &&
                     a.num_tokens >= 0 && a.num_tokens <= a.capacity,
                 ErrorCode::kInvalidArgument, "moekit::detail::ep_route: bad sizes (G = ", a.world,
                 ", E = ", a.num_experts, ", k = ", a.top_k, ", T = ", a.num_tokens, ", capacity = ", a.capacity, ")");
  ep_route_kernel<<<1, kRouteThreads, 0, stream>>>(a);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void ep_pack_rows(const uint8_t* xq, const float* sxq, const int32_t* ids, const float* weights, const int32_t* pos,
                  int64_t num_tokens, int64_t hidden, int top_k, int num_experts, int world, int64_t capacity,
                  uint8_t* send_x, float* send_sx, int32_t* send_ids, float* send_w, cudaStream_t stream) {
  if (num_tokens == 0) return;
  MOEKIT_REQUIRE(hidden % 16 == 0, ErrorCode::kInvalidArgument, "moekit::detail::ep_pack_rows: hidden = ", hidden,
                 " must be a multiple of 16");
  const unsigned blocks = static_cast<unsigned>(num_tokens < 8192 ? num_tokens : 8192);
  ep_pack_rows_kernel<<<blocks, kPackThreads, 0, stream>>>(xq, sxq, ids, weights, pos, num_tokens, hidden, top_k,
                                                           num_experts, world, capacity, send_x, send_sx, send_ids,
                                                           send_w);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void ep_copy_scales(const float* src, EpScaleLayout src_layout, float* dst, EpScaleLayout dst_layout, int64_t rows,
                    int64_t hidden, cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t kb_n = ceil_div(hidden, kQuantBlock);
  const int64_t blocks = std::min<int64_t>((rows * kb_n + 255) / 256, 4096);
  ep_copy_scales_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(src, src_layout, dst, dst_layout, rows, kb_n);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit::detail
