// The expert-parallel layer's kernels (ep_kernels.h).
#include "ep/ep_kernels.h"

#include <algorithm>

#include <cub/block/block_reduce.cuh>

#include "common/check.h"
#include "moe/quantize_scatter_device.cuh"
#include "moekit/numerics.h"

namespace moekit::detail {
namespace {

constexpr int kTokenThreads = 256;
constexpr int kScanThreads = 1024;
constexpr int kPackThreads = 256;

// The combine map entries of token t, given its row in each rank's block (row_of[p], −1: none).
__device__ __forceinline__ void write_combine_map(const EpSourceArgs& a, int64_t t, const int* row_of,
                                                  int per_rank) {
  if (a.deterministic) {
    for (int j = 0; j < a.top_k; ++j) {
      const int32_t id = a.ids[t * a.top_k + j];
      int32_t m = -1;
      if (id >= 0 && id < a.num_experts) {
        const int p = id / per_rank;
        m = int32_t((p * a.capacity + row_of[p]) * a.top_k + j);
      }
      a.combine_map[t * a.top_k + j] = m;
    }
  } else {
    for (int p = 0; p < a.world; ++p) {
      a.combine_map[t * a.world + p] = row_of[p] >= 0 ? int32_t(p * a.capacity + row_of[p]) : -1;
      a.ones[t * a.world + p] = 1.0f;
    }
  }
}

// Token t's destination mask (bit p: rank p owns one of its experts); counts its ids outside
// [−1, E) into `invalid`. With `rec` (low latency's record of row t, padding rows ≥ T included),
// also writes the record's routing: ids outside [0, E) as −1, padding weights 0.
__device__ __forceinline__ uint32_t route_token(const EpSourceArgs& a, int64_t t, bool live, float* rec,
                                                int& invalid) {
  const int per_rank = a.num_experts / a.world;
  uint32_t mask = 0;
  for (int j0 = 0; j0 < a.top_k; j0 += 8) {  // 8 loads in flight, then the work
    int32_t id8[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) id8[u] = live && j0 + u < a.top_k ? a.ids[t * a.top_k + j0 + u] : -1;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      if (j0 + u >= a.top_k) break;
      const int32_t id = id8[u];
      const bool ok = id >= 0 && id < a.num_experts;
      invalid += (id < -1 || id >= a.num_experts) ? 1 : 0;
      if (ok) mask |= 1u << (id / per_rank);
      if (rec) {
        rec[j0 + u] = __int_as_float(ok ? id : -1);
        rec[a.top_k + j0 + u] = live ? a.weights[t * a.top_k + j0 + u] : 0.0f;
      }
    }
  }
  return mask;
}

// Low latency, one thread per row of the capacity: the invalid ids, the record's routing and the
// token's combine map (row t everywhere).
__global__ void __launch_bounds__(kTokenThreads) ep_route_tokens_kernel(EpSourceArgs a) {
  using Reduce = cub::BlockReduce<int, kTokenThreads>;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  const int64_t t = int64_t(blockIdx.x) * kTokenThreads + threadIdx.x;
  int invalid = 0;
  if (t < a.capacity) {
    const bool live = t < a.num_tokens;
    const EpMeta m{int(ceil_div(a.hidden, kQuantBlock)), a.top_k};
    const uint32_t mask = route_token(a, t, live, a.send_meta + t * m.words() + m.kb, invalid);
    if (live) {
      int row_of[kEpMaxRanks];
      for (int p = 0; p < a.world; ++p) row_of[p] = (mask >> p) & 1u ? int(t) : -1;
      write_combine_map(a, t, row_of, a.num_experts / a.world);
    }
  }
  const int block_invalid = Reduce(reduce_tmp).Sum(invalid);
  if (threadIdx.x == 0 && a.invalid_count && block_invalid) atomicAdd(a.invalid_count, block_invalid);
}

// High throughput (compact rows), one CTA over the tokens in chunks of kScanThreads: a token's
// mask, then per rank a ballot gives its rank within its warp and the warps' counts, which one
// lane per rank scans over the warps, carried across chunks. One CTA, so it sets the invalid
// count (no memset, no second launch).
__global__ void __launch_bounds__(kScanThreads) ep_route_positions_kernel(EpSourceArgs a) {
  constexpr int kWarps = kScanThreads / 32;
  using Reduce = cub::BlockReduce<int, kScanThreads>;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int warp_first[kEpMaxRanks][kWarps];
  __shared__ int carried[kEpMaxRanks];
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  if (tid < kEpMaxRanks) carried[tid] = 0;
  __syncthreads();
  int invalid = 0;
  for (int64_t base = 0; base < a.num_tokens; base += kScanThreads) {
    const int64_t t = base + tid;
    const uint32_t mask = route_token(a, t, t < a.num_tokens, nullptr, invalid);
    uint32_t below[kEpMaxRanks];
    for (int p = 0; p < a.world; ++p) {
      const uint32_t b = __ballot_sync(0xFFFFFFFFu, (mask >> p) & 1u);
      below[p] = __popc(b & ((1u << lane) - 1u));
      if (lane == 0) warp_first[p][warp] = __popc(b);
    }
    __syncthreads();
    if (warp == 0 && lane < a.world) {  // lane p: rank p's warps, in order
      int run = carried[lane];
      for (int w = 0; w < kWarps; ++w) {
        const int n = warp_first[lane][w];
        warp_first[lane][w] = run;
        run += n;
      }
      carried[lane] = run;
    }
    __syncthreads();
    if (t < a.num_tokens)
      for (int p = 0; p < a.world; ++p)
        a.pos[t * a.world + p] = (mask >> p) & 1u ? warp_first[p][warp] + int(below[p]) : -1;
    __syncthreads();  // warp_first is rewritten by the next chunk
  }
  if (tid < a.world) a.send_counts[tid] = carried[tid];
  const int total_invalid = Reduce(reduce_tmp).Sum(invalid);
  if (tid == 0 && a.invalid_count) *a.invalid_count = total_invalid;
}

// One warp per unit (token t, 2U consecutive 128-column groups): quantizes the unit once, as the
// MoE layer's own quantization does (quantize_unit), and stores its FP8 codes and scales into
// every destination row of the token; compact, the first unit's warp also writes the records'
// routing and the token's combine map.
template <int U>
__global__ void __launch_bounds__(kPackThreads) ep_quantize_pack_kernel(EpSourceArgs a) {
  ScatterParams sp{};
  sp.x = static_cast<const uint16_t*>(a.x);
  sp.hidden = int(a.hidden);
  const int lane = int(threadIdx.x) & 31, sub = lane & 15;
  const int groups = int(ceil_div(a.hidden, kQuantBlock)), chunks = (groups + 2 * U - 1) / (2 * U);
  const EpMeta m{groups, a.top_k};
  const int destinations = a.compact ? a.world : 1;
  const int64_t warps = int64_t(gridDim.x) * (kPackThreads / 32);
  for (int64_t unit = int64_t(blockIdx.x) * (kPackThreads / 32) + (threadIdx.x >> 5); unit < a.num_tokens * chunks;
       unit += warps) {
    const int64_t t = unit / chunks;
    const int chunk = int(unit - t * chunks);
    QuantUnit<U> qu;
    quantize_unit<U, false>(sp, t, chunk, qu);
    const int g0 = chunk * 2 * U + (lane >> 4);
    for (int p = 0; p < destinations; ++p) {
      const int32_t row = a.compact ? a.pos[t * a.world + p] : int32_t(t);
      if (row < 0) continue;  // uniform over the warp
      const int64_t dst = (a.compact ? int64_t(p) * a.capacity : 0) + row;
      float* rec = a.send_meta + dst * m.words();
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int g = g0 + 2 * u, col = g * 128 + sub * 8;
        if (col < a.hidden) *reinterpret_cast<uint2*>(a.send_x + dst * a.hidden + col) = qu.q[u];
        if (sub == 0 && g < groups) rec[g] = qu.sc[u];
      }
      if (chunk == 0 && a.compact) {
        for (int j = lane; j < a.top_k; j += 32) {
          const int32_t id = a.ids[t * a.top_k + j];
          rec[groups + j] = __int_as_float((id >= 0 && id < a.num_experts) ? id : -1);
          rec[groups + a.top_k + j] = a.weights[t * a.top_k + j];
        }
      }
    }
    if (chunk == 0 && a.compact && lane == 0) {
      int row_of[kEpMaxRanks];
      for (int p = 0; p < a.world; ++p) row_of[p] = a.pos[t * a.world + p];
      write_combine_map(a, t, row_of, a.num_experts / a.world);
    }
  }
}

__global__ void ep_unpack_meta_kernel(const float* __restrict__ meta, EpMeta m, int64_t rows, bool physical,
                                      float* __restrict__ sx, int32_t* __restrict__ ids, float* __restrict__ weights) {
  const int64_t ld = sfa_ld(rows), words = m.words();
  const int64_t n = rows * words;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / words;
    const int w = int(i - r * words);
    const float v = meta[i];
    if (w < m.kb)
      sx[physical ? int64_t(w) * ld + r : r * m.kb + w] = v;
    else if (w < m.kb + m.top_k)
      ids[r * m.top_k + (w - m.kb)] = __float_as_int(v);
    else
      weights[r * m.top_k + (w - m.kb - m.top_k)] = v;
  }
}

}  // namespace

void ep_route(const EpSourceArgs& a, cudaStream_t stream) {
  MOEKIT_REQUIRE(a.world >= 1 && a.world <= kEpMaxRanks && a.num_experts % a.world == 0 && a.top_k >= 1 &&
                     a.num_tokens >= 0 && a.num_tokens <= a.capacity && a.hidden % 16 == 0,
                 ErrorCode::kInvalidArgument, "moekit::detail::ep_route: bad sizes (G = ", a.world,
                 ", E = ", a.num_experts, ", k = ", a.top_k, ", T = ", a.num_tokens, ", capacity = ", a.capacity,
                 ", H = ", a.hidden, ")");
  if (a.compact) {
    ep_route_positions_kernel<<<1, kScanThreads, 0, stream>>>(a);
  } else {
    if (a.invalid_count) MOEKIT_CUDA_CHECK(cudaMemsetAsync(a.invalid_count, 0, sizeof(int32_t), stream));
    ep_route_tokens_kernel<<<static_cast<unsigned>((a.capacity + kTokenThreads - 1) / kTokenThreads), kTokenThreads,
                             0, stream>>>(a);
  }
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void ep_quantize_pack(const EpSourceArgs& a, cudaStream_t stream) {
  if (a.num_tokens == 0) return;
  const int64_t groups = ceil_div(a.hidden, kQuantBlock);
  sm90::quant::with_act_unroll(a.num_tokens, groups, [&](auto u) {
    constexpr int U = decltype(u)::value;
    const int64_t units = a.num_tokens * ((groups + 2 * U - 1) / (2 * U));
    const int64_t blocks = std::min<int64_t>((units + kPackThreads / 32 - 1) / (kPackThreads / 32), 132 * 16);
    ep_quantize_pack_kernel<U><<<static_cast<unsigned>(blocks), kPackThreads, 0, stream>>>(a);
  });
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

void ep_unpack_meta(const float* meta, EpMeta m, int64_t rows, bool physical, float* sx, int32_t* ids, float* weights,
                    cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t blocks = std::min<int64_t>((rows * m.words() + 255) / 256, 132 * 16);
  ep_unpack_meta_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(meta, m, rows, physical, sx, ids,
                                                                           weights);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace moekit::detail
