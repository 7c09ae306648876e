// The single-CTA moe_sort (moe_sort.cu describes the algorithm, steps a–e) as device phases, so the
// plain sort kernel (ids from global memory) and the MoE forward's fused route + sort
// (route_sort.cu: ids straight from the routing warps) run the same code:
//   small_sort_begin    (a) the -1 fill of CTA 0's rows, zeroed histograms          — no sync inside
//   small_sort_classify (b) keys from global ids, dropped slots' e2p = -1, invalid ids
//   small_sort_keep     (b) for one slot whose id is known valid (fused routing)
//   small_sort_finish   (c)–(e) count, scan, stable placement (its own __syncthreads)
// A __syncthreads must separate begin from classify and classify/keep from finish.
// Helper CTAs (blockIdx.x > 0) run small_sort_helper_fill only.
#pragma once
#include <cstdint>

#include <cub/block/block_scan.cuh>

#include "moekit/grouped_gemm.h"
#include "moekit/moe_sort.h"
#include "ptx/ptx.cuh"

namespace moekit::detail::small_sort {

constexpr int kThreads = 1024;
constexpr int kMaxSlots = 4096;    // n = T * k
constexpr int kMaxExperts = 1024;  // L
constexpr int kHistWarps = 16;     // warps that own a slot range in the count / place steps
constexpr int kFillRowsPerCta = 8192;  // rows of the -1 fill per helper CTA (2 int4 per thread)
static_assert(kMaxExperts <= kThreads, "one thread per local expert in the scan");
// hist entries are exclusive prefixes of counts inside one expert: at most n.
static_assert(kMaxSlots <= 65535, "16-bit per-warp histogram");

struct Params {
  const int32_t* ids;     // [n] (classify only)
  int32_t* counts;        // [L]
  int32_t* offsets;       // [L + 1]
  int32_t* p2e;           // [rows]
  int32_t* e2p;           // [n]
  int32_t* invalid_count; // [1]
  int64_t rows;           // rows_bound
  int64_t own_rows;       // B: CTA 0 fills [0, B), the helper CTAs [B, rows)
  int n;
  int num_experts;
  int local_offset;
  int local_count;
};

/// Shared memory of CTA 0 (≈ 44 KB, static).
struct Smem {
  using Scan = cub::BlockScan<int32_t, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
  alignas(16) uint16_t hist[kHistWarps][kMaxExperts];  // 32 KB, zeroed as uint4
  uint16_t keys[kMaxSlots];                            // 8 KB: local expert, or L for a dropped slot
  int32_t seg[kMaxExperts];                            // 4 KB: offsets[e]
  typename Scan::TempStorage scan_temp;
  int32_t invalid_total;
};

// p[begin, end) = -1 by the calling CTA: scalar head up to 16-byte alignment, int4 body, scalar tail.
__device__ __forceinline__ void fill_minus_one(int32_t* p, int64_t begin, int64_t end) {
  if (begin >= end) return;
  int32_t* a = p + begin;
  const int64_t count = end - begin;
  const int64_t head_max = int64_t(((16u - (reinterpret_cast<uintptr_t>(a) & 15u)) & 15u) >> 2);
  const int64_t head = head_max < count ? head_max : count;
  if (int64_t(threadIdx.x) < head) a[threadIdx.x] = -1;
  const int64_t vecs = (count - head) >> 2;
  int4* v = reinterpret_cast<int4*>(a + head);
  for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x) v[i] = make_int4(-1, -1, -1, -1);
  const int64_t tail = head + vecs * 4;
  if (tail + int64_t(threadIdx.x) < count) a[tail + threadIdx.x] = -1;
}

/// Helper CTA b ≥ 1: a slice of the rows no routing can reach.
__device__ __forceinline__ void small_sort_helper_fill(const Params& p) {
  const int64_t begin = p.own_rows + int64_t(blockIdx.x - 1) * kFillRowsPerCta;
  const int64_t end = begin + kFillRowsPerCta < p.rows ? begin + kFillRowsPerCta : p.rows;
  fill_minus_one(p.p2e, begin, end);
}

/// (a) -1 over the rows CTA 0 may place into, zeroed histograms and invalid count.
__device__ __forceinline__ void small_sort_begin(const Params& p, Smem& s) {
  fill_minus_one(p.p2e, 0, p.own_rows);
  uint4* h = reinterpret_cast<uint4*>(&s.hist[0][0]);
  constexpr int kVecs = int(sizeof(s.hist) / sizeof(uint4));
  for (int i = threadIdx.x; i < kVecs; i += kThreads) h[i] = make_uint4(0u, 0u, 0u, 0u);
  if (threadIdx.x == 0) s.invalid_total = 0;
}

/// (b) for slot i whose id is in [0, num_experts) (routed ids always are).
__device__ __forceinline__ void small_sort_keep(const Params& p, Smem& s, int i, int32_t id) {
  const int32_t local = id - p.local_offset;
  const bool keep = local >= 0 && local < p.local_count;
  s.keys[i] = static_cast<uint16_t>(keep ? local : p.local_count);
  if (!keep) p.e2p[i] = -1;
}

/// (b) classify every slot from p.ids.
__device__ __forceinline__ void small_sort_classify(const Params& p, Smem& s) {
  const int L = p.local_count;
  int invalid_mine = 0;
  for (int i = threadIdx.x; i < p.n; i += kThreads) {
    const int32_t id = ptx::ld_chain(p.ids + i);
    const bool invalid = id < -1 || id >= p.num_experts;
    const int32_t local = id >= 0 ? id - p.local_offset : -1;
    const bool keep = !invalid && local >= 0 && local < L;
    s.keys[i] = static_cast<uint16_t>(keep ? local : L);
    if (!keep) p.e2p[i] = -1;
    invalid_mine += invalid ? 1 : 0;
  }
  invalid_mine = __reduce_add_sync(0xFFFFFFFFu, invalid_mine);
  if ((threadIdx.x & 31) == 0 && invalid_mine != 0) atomicAdd(&s.invalid_total, invalid_mine);
}

/// (c)–(e): per-warp counts, scan into counts / 128-aligned offsets / invalid_count, placement.
__device__ __forceinline__ void small_sort_finish(const Params& p, Smem& s) {
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int L = p.local_count;

  // Contiguous slot range of each counting warp, a whole number of 32-slot steps.
  const int per_warp = (p.n + kHistWarps * 32 - 1) / (kHistWarps * 32) * 32;
  const int range_begin = warp * per_warp;
  const int range_end = min(p.n, range_begin + per_warp);
  const unsigned lanes_below = (1u << lane) - 1u;

  // (c) per-warp counts. The loop bound is uniform per warp.
  if (warp < kHistWarps) {
    for (int i0 = range_begin; i0 < range_end; i0 += 32) {
      const int i = i0 + lane;
      const int key = i < range_end ? int(s.keys[i]) : L;
      const bool keep = key < L;
      const unsigned keep_mask = __ballot_sync(0xFFFFFFFFu, keep);
      if (keep) {
        const unsigned peers = __match_any_sync(keep_mask, key);
        if (lane == __ffs(peers) - 1) s.hist[warp][key] = static_cast<uint16_t>(s.hist[warp][key] + __popc(peers));
      }
      __syncwarp();
    }
  }
  __syncthreads();

  // (d) per-warp exclusive prefixes, counts, 128-aligned offsets.
  {
    const int e = tid;
    int32_t c = 0;
    if (e < L) {
#pragma unroll
      for (int w = 0; w < kHistWarps; ++w) {
        const int32_t h = s.hist[w][e];
        s.hist[w][e] = static_cast<uint16_t>(c);
        c += h;
      }
    }
    const int32_t aligned = (c + int32_t(kGroupAlign) - 1) / int32_t(kGroupAlign) * int32_t(kGroupAlign);
    int32_t start = 0;
    Smem::Scan(s.scan_temp).ExclusiveSum(aligned, start);
    if (e < L) {
      s.seg[e] = start;
      p.counts[e] = c;
      p.offsets[e + 1] = start + aligned;
    }
    if (e == 0) {
      p.offsets[0] = 0;
      *p.invalid_count = s.invalid_total;
    }
  }
  __syncthreads();

  // (e) stable placement.
  if (warp < kHistWarps) {
    for (int i0 = range_begin; i0 < range_end; i0 += 32) {
      const int i = i0 + lane;
      const int key = i < range_end ? int(s.keys[i]) : L;
      const bool keep = key < L;
      const unsigned keep_mask = __ballot_sync(0xFFFFFFFFu, keep);
      if (keep) {
        const unsigned peers = __match_any_sync(keep_mask, key);
        const int leader = __ffs(peers) - 1;
        int32_t base = 0;
        if (lane == leader) base = s.hist[warp][key];
        base = __shfl_sync(peers, base, leader);
        const int32_t row = s.seg[key] + base + __popc(peers & lanes_below);
        p.p2e[row] = i;
        p.e2p[i] = row;
        if (lane == leader) s.hist[warp][key] = static_cast<uint16_t>(base + __popc(peers));
      }
      __syncwarp();
    }
  }
}

}  // namespace moekit::detail::small_sort
