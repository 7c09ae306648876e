// moekit — device sort of routed slots into the contiguous expert layout (include/moekit/moe_sort.h,
// SPEC §3) and its internal entry points (moe_sort_internal.h). The activation permutation that
// follows it is moe_permute.cu.
//
// moe_sort (n = T * k slots, L = local_count experts), all on `stream`, no host synchronization.
// Two paths with bit-identical outputs, chosen on the host from (T, k, L) only:
//
// Single-CTA path (n <= kMaxSlots and L <= kMaxExperts, small_sort_device.cuh; decode batch sizes): ONE launch,
// no memset, the workspace untouched. CTA 0 (1024 threads) does everything in shared memory:
//   a. fill     permuted_to_expanded[0, B) = -1 with 16-byte stores, where
//               B = align_up(n + 127 * min(n, L), 128) >= offsets[L] for every routing (at most
//               min(n, L) experts are non-empty and each pads by at most 127 rows).
//   b. classify one thread per slot (same semantics as classify_kernel): key = local expert or L
//               ("dropped") into smem keys[n]; dropped slots get expanded_to_permuted = -1 here;
//               invalid ids counted with a warp reduction + one smem atomic per warp.
//   c. count    kHistWarps warps each own a contiguous range of slots and walk it 32 slots at
//               a time; __match_any_sync groups equal keys and the group's first lane adds the
//               group size to hist[warp][key] (16-bit, smem). Only that lane touches that entry in
//               that step, and __syncwarp orders the steps, so no atomics are needed.
//   d. scan     thread e turns hist[·][e] into an exclusive prefix over the warps (each warp's
//               first rank inside expert e) and its total count c_e; a BlockScan over
//               align_up(c_e, 128) gives the 128-aligned offsets (contiguous_offsets). counts,
//               offsets and invalid_count are written here.
//   e. place    the same warps walk their ranges again: a slot's row is
//               offsets[e] + hist[w][e] + (its rank among the equal-key lanes of this step, popc of
//               the match mask below its lane); the group's first lane then advances hist[w][e].
//               Ranges are contiguous and increasing in w, steps increasing inside a range, lanes
//               increasing inside a step: rows within an expert are in increasing expanded index
//               (stable), exactly the radix path's order. Writes permuted_to_expanded[row] and
//               expanded_to_permuted[slot] (after the -1 fill of (a): the __syncthreads between
//               orders them).
// CTAs 1.. (grid = 1 + ceil((rows_bound - B) / kFillRowsPerCta)) only fill
// permuted_to_expanded[B, rows_bound) = -1, which needs no routing information: at T = 1, E = 256
// that is 31.6 K of the 32.6 K rows, spread over 4 CTAs instead of serialised in CTA 0.
//
// Radix path (everything else):
//   1. memset    the workspace counters (L per-expert counts + 1 invalid count) to 0.
//   2. classify  one thread per slot: key = local expert id, or L ("dropped") for -1, ids outside
//                the slice and invalid ids; value = the slot's expanded index. Dropped slots get
//                expanded_to_permuted = -1 here. Per-expert counts use one atomicAdd per distinct
//                expert per warp (__match_any_sync), so "all tokens on one expert" costs n/32
//                atomics; invalid ids are counted with a warp ballot.
//   3. sort      cub::DeviceRadixSort::SortPairs (DoubleBuffer form) of (key, expanded index) over
//                the key's bit_width(L) low bits. Radix sort is stable and the values go in
//                increasing, so within an expert the rows come out in increasing expanded index.
//   4. scan      one CTA: expert_counts, the 128-aligned expert_offsets (contiguous_offsets), the
//                unaligned exclusive scan seg_start (an expert's first position in the sorted
//                array) and invalid_count.
//   5. fill      one thread per permuted row r < rows_bound: find the expert e with
//                offsets[e] <= r < offsets[e+1] (binary search); if j = r - offsets[e] < counts[e]
//                the row holds sorted element seg_start[e] + j: permuted_to_expanded[r] = its
//                expanded index i and expanded_to_permuted[i] = r; otherwise (padding, or r past
//                offsets[L]) permuted_to_expanded[r] = -1. Every entry is written exactly once.
// T = 0 runs steps 1, 4 and 5 only (zero counts and offsets, all rows -1).
//
// The workspace holds, each region 256-byte aligned (the pointer given is aligned up, the size
// includes the slack): counters [L + 1], seg_start [L], keys [2][n] (uint32), values [2][n]
// (int32), cub's temporary storage for n items. Its size depends only on (T, k, L) — and on the
// device's cub tuning policy, which cub reads from the current device, so moe_sort_workspace_size
// needs a CUDA device.
#include <algorithm>
#include <climits>
#include <cstdint>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include "common/check.h"
#include "moe/moe_sort_internal.h"
#include "moe/moe_sort_launch.h"
#include "moe/quantize_scatter_device.cuh"
#include "moe/route_sort.h"
#include "moe/small_sort_device.cuh"
#include "moekit/grouped_gemm.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"
#include "ptx/ptx.cuh"
#include "runtime/pdl.h"

namespace moekit {
namespace {

using detail::ScatterParams;
using namespace detail::sort_launch;

constexpr size_t kRegionAlign = 256;

// ---------------------------------------------------------------------------------------------
// moe_sort kernels
// ---------------------------------------------------------------------------------------------

struct ClassifyParams {
  const int32_t* ids;
  uint32_t* keys;   // local expert, or L for a dropped slot
  int32_t* values;  // expanded index
  int32_t* expanded_to_permuted;
  int32_t* counters;  // [L] per-expert counts, [L] invalid count
  int64_t n;
  int num_experts;
  int local_offset;
  int local_count;
};

__global__ void __launch_bounds__(kThreads) classify_kernel(const ClassifyParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  // The loop bound is uniform per warp (i0 is the warp's first slot), so every lane takes part in
  // the warp collectives of every iteration.
  for (int64_t i0 = int64_t(blockIdx.x) * kThreads + (threadIdx.x & ~31); i0 < p.n; i0 += stride) {
    const int64_t i = i0 + lane;
    const bool in = i < p.n;
    const int32_t id = in ? p.ids[i] : -1;
    const bool invalid = in && (id < -1 || id >= p.num_experts);
    const int32_t local = id >= 0 ? id - p.local_offset : -1;
    const bool keep = in && !invalid && local >= 0 && local < p.local_count;
    const uint32_t key = static_cast<uint32_t>(keep ? local : p.local_count);
    if (in) {
      p.keys[i] = key;
      p.values[i] = static_cast<int32_t>(i);
      if (!keep) p.expanded_to_permuted[i] = -1;
    }
    const unsigned keep_mask = __ballot_sync(0xFFFFFFFFu, keep);
    if (keep) {
      const unsigned peers = __match_any_sync(keep_mask, key);
      if (lane == __ffs(peers) - 1) atomicAdd(p.counters + key, __popc(peers));
    }
    const unsigned invalid_mask = __ballot_sync(0xFFFFFFFFu, invalid);
    if (lane == 0 && invalid_mask != 0u) atomicAdd(p.counters + p.local_count, __popc(invalid_mask));
  }
}

struct ScanParams {
  const int32_t* counters;  // [L + 1]
  int32_t* counts;          // out [L]
  int32_t* offsets;         // out [L + 1]
  int32_t* seg_start;       // ws [L]
  int32_t* invalid_count;   // out [1]
  int local_count;
};

// One CTA. Both scans at once on a packed 64-bit value: high half the aligned count, low half the
// count (both totals are < 2^31, so the low half never carries into the high half).
__global__ void __launch_bounds__(kThreads) scan_kernel(const ScanParams p) {
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  __shared__ unsigned long long carry;
  if (threadIdx.x == 0) {
    carry = 0;
    p.offsets[0] = 0;
    *p.invalid_count = p.counters[p.local_count];
  }
  __syncthreads();
  for (int base = 0; base < p.local_count; base += kThreads) {
    const int e = base + int(threadIdx.x);
    const int32_t c = e < p.local_count ? p.counters[e] : 0;
    const unsigned long long aligned =
        static_cast<unsigned long long>((int64_t(c) + kGroupAlign - 1) / kGroupAlign * kGroupAlign);
    const unsigned long long packed = (aligned << 32) | static_cast<unsigned long long>(c);
    unsigned long long inclusive = 0, total = 0;
    Scan(temp).InclusiveSum(packed, inclusive, total);
    if (e < p.local_count) {
      const unsigned long long v = carry + inclusive;
      p.counts[e] = c;
      p.offsets[e + 1] = static_cast<int32_t>(v >> 32);
      p.seg_start[e] = static_cast<int32_t>(v & 0xFFFFFFFFull) - c;
    }
    __syncthreads();
    if (threadIdx.x == 0) carry += total;
    __syncthreads();
  }
}

struct FillParams {
  const int32_t* offsets;    // [L + 1]
  const int32_t* counts;     // [L]
  const int32_t* seg_start;  // [L]
  const int32_t* sorted_values;
  int32_t* permuted_to_expanded;
  int32_t* expanded_to_permuted;
  int64_t rows;
  int local_count;
};

__global__ void __launch_bounds__(kThreads) fill_kernel(const FillParams p) {
  const int32_t total = ptx::ld_chain(p.offsets + p.local_count);
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t r = int64_t(blockIdx.x) * kThreads + threadIdx.x; r < p.rows; r += stride) {
    int32_t v = -1;
    if (r < total) {
      // Largest e in [0, L) with offsets[e] <= r; then offsets[e+1] > r (r < offsets[L]).
      int lo = 0, hi = p.local_count;
      while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (ptx::ld_chain(p.offsets + mid) <= r) {
          lo = mid;
        } else {
          hi = mid;
        }
      }
      const int32_t j = static_cast<int32_t>(r) - ptx::ld_chain(p.offsets + lo);
      if (j < ptx::ld_chain(p.counts + lo)) {
        v = p.sorted_values[ptx::ld_chain(p.seg_start + lo) + j];
        p.expanded_to_permuted[v] = static_cast<int32_t>(r);
      }
    }
    p.permuted_to_expanded[r] = v;
  }
}

// ---------------------------------------------------------------------------------------------
// moe_sort, single-CTA path
// ---------------------------------------------------------------------------------------------

// Single-CTA path: the phases of small_sort_device.cuh. CTAs from `sort_ctas` on quantize the tokens
// (moe_sort_quantize; qp.units = 0 and no such CTAs otherwise).
__global__ void __launch_bounds__(detail::small_sort::kThreads)
    small_sort_kernel(const detail::small_sort::Params p, const ScatterParams qp, unsigned sort_ctas) {
  namespace ss = detail::small_sort;
  ptx::griddep_wait();  // PDL (runtime/pdl.h): ids and x from the previous kernel; maps an earlier one may read
  ptx::griddep_launch_dependents();
  if (blockIdx.x >= sort_ctas) {
    detail::quantize_ctas<ss::kThreads>(qp, blockIdx.x - sort_ctas, gridDim.x - sort_ctas);
    return;
  }
  if (blockIdx.x > 0) {
    ss::small_sort_helper_fill(p);
    return;
  }
  __shared__ ss::Smem smem;
  ss::small_sort_begin(p, smem);
  __syncthreads();
  ss::small_sort_classify(p, smem);
  __syncthreads();
  ss::small_sort_finish(p, smem);
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------

size_t align_region(size_t bytes) { return (bytes + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

// Number of low key bits the sort looks at: keys are in [0, L] (L = "dropped").
int key_bits(int local_count) {
  int bits = 0;
  while ((int64_t(1) << bits) <= local_count) ++bits;
  return bits;
}

// Checks (T, k, L) and returns n = T * k. Shared by rows_bound, workspace_size and moe_sort.
int64_t validate_sizes(const char* fn, int64_t num_tokens, int top_k, int local_count) {
  MOEKIT_REQUIRE(num_tokens >= 0, ErrorCode::kInvalidArgument, fn, ": num_tokens = ", num_tokens, " must be >= 0");
  MOEKIT_REQUIRE(top_k >= 1, ErrorCode::kInvalidArgument, fn, ": top_k = ", top_k, " must be >= 1");
  MOEKIT_REQUIRE(local_count >= 1, ErrorCode::kInvalidArgument, fn, ": local_count = ", local_count,
                 " must be >= 1");
  MOEKIT_REQUIRE(num_tokens <= INT32_MAX && num_tokens * top_k <= INT32_MAX, ErrorCode::kInvalidArgument, fn,
                 ": num_tokens * top_k = ", num_tokens, " * ", top_k, " must be < 2^31");
  const int64_t n = num_tokens * top_k;
  const int64_t rows = contiguous_rows_upper_bound(n, local_count);
  MOEKIT_REQUIRE(rows <= INT32_MAX, ErrorCode::kInvalidArgument, fn, ": the contiguous layout of ", n,
                 " rows over ", local_count, " experts can need ", rows, " rows; at most 2^31 - 1 are supported");
  return n;
}

size_t cub_sort_bytes(int64_t n, int local_count) {
  if (n == 0) return 0;
  cub::DoubleBuffer<uint32_t> keys(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> values(nullptr, nullptr);
  size_t bytes = 0;
  MOEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, static_cast<int>(n), 0,
                                                    key_bits(local_count), cudaStream_t{}));
  return bytes;
}

// Workspace regions (offsets from the 256-byte-aligned base).
struct WorkspaceLayout {
  size_t counters = 0, seg_start = 0, keys0 = 0, keys1 = 0, values0 = 0, values1 = 0, cub = 0;
  size_t cub_bytes = 0;
  size_t total = 0;  // including the alignment slack of the base pointer
};

WorkspaceLayout workspace_layout(int64_t n, int local_count) {
  WorkspaceLayout w;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t off = at;
    at += align_region(bytes);
    return off;
  };
  const size_t items = static_cast<size_t>(n) * sizeof(int32_t);
  w.counters = take((size_t(local_count) + 1) * sizeof(int32_t));
  w.seg_start = take(size_t(local_count) * sizeof(int32_t));
  w.keys0 = take(items);
  w.keys1 = take(items);
  w.values0 = take(items);
  w.values1 = take(items);
  w.cub_bytes = cub_sort_bytes(n, local_count);
  w.cub = take(w.cub_bytes);
  w.total = at + kRegionAlign;
  return w;
}

}  // namespace

int64_t moe_sort_rows_bound(int64_t num_tokens, int top_k, int local_count) {
  const int64_t n = validate_sizes("moekit::moe_sort_rows_bound", num_tokens, top_k, local_count);
  return contiguous_rows_upper_bound(n, local_count);
}

size_t moe_sort_workspace_size(int64_t num_tokens, int top_k, int local_count) {
  const int64_t n = validate_sizes("moekit::moe_sort_workspace_size", num_tokens, top_k, local_count);
  return workspace_layout(n, local_count).total;
}

namespace detail {

bool moe_sort_single_cta(int64_t num_tokens, int top_k, int local_count) {
  const int64_t n = validate_sizes("moekit::detail::moe_sort_single_cta", num_tokens, top_k, local_count);
  return n <= small_sort::kMaxSlots && local_count <= small_sort::kMaxExperts;
}

int64_t moe_sort_validate(const char* fn, const int32_t* topk_ids, int64_t num_tokens, int top_k,
                          int num_experts_total, int local_offset, int local_count, const MoeSortBuffers& out,
                          const void* workspace, size_t workspace_bytes) {
  const int64_t n = validate_sizes(fn, num_tokens, top_k, local_count);
  MOEKIT_REQUIRE(num_experts_total >= 1, ErrorCode::kInvalidArgument, fn, ": num_experts_total = ",
                 num_experts_total, " must be >= 1");
  MOEKIT_REQUIRE(local_offset >= 0 && int64_t(local_offset) + local_count <= num_experts_total,
                 ErrorCode::kInvalidArgument, fn, ": the local slice [", local_offset, ", ",
                 int64_t(local_offset) + local_count, ") must lie inside [0, num_experts_total = ", num_experts_total,
                 ")");
  MOEKIT_REQUIRE(out.expert_counts && out.expert_offsets && out.permuted_to_expanded && out.invalid_count,
                 ErrorCode::kInvalidArgument, fn,
                 ": expert_counts, expert_offsets, permuted_to_expanded and invalid_count are required");
  MOEKIT_REQUIRE(n == 0 || (topk_ids && out.expanded_to_permuted), ErrorCode::kInvalidArgument, fn,
                 ": topk_ids and expanded_to_permuted are required when num_tokens * top_k = ", n, " > 0");
  for (const void* p : {static_cast<const void*>(topk_ids), static_cast<const void*>(out.expert_counts),
                        static_cast<const void*>(out.expert_offsets),
                        static_cast<const void*>(out.permuted_to_expanded),
                        static_cast<const void*>(out.expanded_to_permuted),
                        static_cast<const void*>(out.invalid_count)}) {
    MOEKIT_REQUIRE(aligned_to(p, 4), ErrorCode::kMisaligned, fn, ": the int32 buffer ", p,
                   " must be 4-byte aligned");
  }
  MOEKIT_REQUIRE(workspace != nullptr, ErrorCode::kInvalidArgument, fn, ": workspace is required");
  const WorkspaceLayout w = workspace_layout(n, local_count);
  MOEKIT_REQUIRE(workspace_bytes >= w.total, ErrorCode::kInvalidArgument, fn, ": workspace_bytes = ",
                 workspace_bytes, " is smaller than moe_sort_workspace_size(", num_tokens, ", ", top_k, ", ",
                 local_count, ") = ", w.total);
  return n;
}

small_sort::Params small_sort_params(const int32_t* topk_ids, int64_t n, int num_experts_total, int local_offset,
                                     int local_count, const MoeSortBuffers& out) {
  const int64_t rows = contiguous_rows_upper_bound(n, local_count);
  small_sort::Params q{};
  q.ids = topk_ids;
  q.counts = out.expert_counts;
  q.offsets = out.expert_offsets;
  q.p2e = out.permuted_to_expanded;
  q.e2p = out.expanded_to_permuted;
  q.invalid_count = out.invalid_count;
  q.rows = rows;
  // Rows any routing can reach: at most min(n, L) non-empty experts, each padded by < 128 rows.
  q.own_rows = std::min<int64_t>(align_up(n + (kGroupAlign - 1) * std::min<int64_t>(n, local_count), kGroupAlign),
                                 rows);
  q.n = static_cast<int>(n);
  q.num_experts = num_experts_total;
  q.local_offset = local_offset;
  q.local_count = local_count;
  return q;
}

unsigned small_sort_grid(const small_sort::Params& q) {
  return static_cast<unsigned>(1 + ceil_div(q.rows - q.own_rows, int64_t{small_sort::kFillRowsPerCta}));
}

void moe_sort_with_path(MoeSortPath path, const int32_t* topk_ids, int64_t num_tokens, int top_k,
                        int num_experts_total, int local_offset, int local_count, const MoeSortBuffers& out,
                        void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  constexpr const char* fn = "moekit::moe_sort";
  const int64_t n = moe_sort_validate(fn, topk_ids, num_tokens, top_k, num_experts_total, local_offset, local_count,
                                      out, workspace, workspace_bytes);
  const int64_t rows = contiguous_rows_upper_bound(n, local_count);
  const WorkspaceLayout w = workspace_layout(n, local_count);
  const bool small = n <= small_sort::kMaxSlots && local_count <= small_sort::kMaxExperts;
  MOEKIT_REQUIRE(path != MoeSortPath::kSingleCta || small, ErrorCode::kInvalidArgument, fn,
                 ": the single-CTA path needs T * k = ", n, " <= ", small_sort::kMaxSlots, " and local_count = ",
                 local_count, " <= ", small_sort::kMaxExperts);
  if (path == MoeSortPath::kSingleCta || (path == MoeSortPath::kAuto && small)) {
    const small_sort::Params q = small_sort_params(topk_ids, n, num_experts_total, local_offset, local_count, out);
    const unsigned grid = small_sort_grid(q);
    launch_pdl(small_sort_kernel, dim3(grid), dim3(small_sort::kThreads), 0, stream, q, ScatterParams{}, grid);
    MOEKIT_CUDA_CHECK(cudaGetLastError());
    return;
  }

  char* base = static_cast<char*>(workspace);
  base += (kRegionAlign - reinterpret_cast<uintptr_t>(base) % kRegionAlign) % kRegionAlign;
  int32_t* counters = reinterpret_cast<int32_t*>(base + w.counters);
  int32_t* seg_start = reinterpret_cast<int32_t*>(base + w.seg_start);

  MOEKIT_CUDA_CHECK(cudaMemsetAsync(counters, 0, (size_t(local_count) + 1) * sizeof(int32_t), stream));

  const int32_t* sorted_values = nullptr;
  if (n > 0) {
    ClassifyParams c{};
    c.ids = topk_ids;
    c.keys = reinterpret_cast<uint32_t*>(base + w.keys0);
    c.values = reinterpret_cast<int32_t*>(base + w.values0);
    c.expanded_to_permuted = out.expanded_to_permuted;
    c.counters = counters;
    c.n = n;
    c.num_experts = num_experts_total;
    c.local_offset = local_offset;
    c.local_count = local_count;
    classify_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(c);
    MOEKIT_CUDA_CHECK(cudaGetLastError());

    cub::DoubleBuffer<uint32_t> keys(reinterpret_cast<uint32_t*>(base + w.keys0),
                                     reinterpret_cast<uint32_t*>(base + w.keys1));
    cub::DoubleBuffer<int32_t> values(reinterpret_cast<int32_t*>(base + w.values0),
                                      reinterpret_cast<int32_t*>(base + w.values1));
    size_t cub_bytes = w.cub_bytes;
    MOEKIT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + w.cub, cub_bytes, keys, values, static_cast<int>(n), 0,
                                                      key_bits(local_count), stream));
    sorted_values = values.Current();
  }

  ScanParams s{};
  s.counters = counters;
  s.counts = out.expert_counts;
  s.offsets = out.expert_offsets;
  s.seg_start = seg_start;
  s.invalid_count = out.invalid_count;
  s.local_count = local_count;
  scan_kernel<<<1, kThreads, 0, stream>>>(s);
  MOEKIT_CUDA_CHECK(cudaGetLastError());

  FillParams f{};
  f.offsets = out.expert_offsets;
  f.counts = out.expert_counts;
  f.seg_start = seg_start;
  f.sorted_values = sorted_values;
  f.permuted_to_expanded = out.permuted_to_expanded;
  f.expanded_to_permuted = out.expanded_to_permuted;
  f.rows = rows;
  f.local_count = local_count;
  fill_kernel<<<grid_for(rows, kThreads), kThreads, 0, stream>>>(f);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

bool moe_sort_quantize_applies(int64_t num_tokens, int top_k, int local_count) {
  return num_tokens >= 1 && top_k >= 1 && num_tokens * top_k <= small_sort::kMaxSlots &&
         local_count <= small_sort::kMaxExperts;
}

void moe_sort_quantize(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts_total,
                       int local_offset, int local_count, const MoeSortBuffers& out, void* workspace,
                       size_t workspace_bytes, const RouteSortQuantize& quantize, cudaStream_t stream) {
  constexpr const char* fn = "moekit::detail::moe_sort_quantize";
  const int64_t n = moe_sort_validate(fn, topk_ids, num_tokens, top_k, num_experts_total, local_offset, local_count,
                                      out, workspace, workspace_bytes);
  MOEKIT_REQUIRE(moe_sort_quantize_applies(num_tokens, top_k, local_count), ErrorCode::kInvalidArgument, fn,
                 ": needs the single-CTA sort: T * k = ", n, " <= ", small_sort::kMaxSlots, " and local_count = ",
                 local_count, " <= ", small_sort::kMaxExperts);
  const small_sort::Params q = small_sort_params(topk_ids, n, num_experts_total, local_offset, local_count, out);
  ScatterParams qp{};
  const unsigned quant_ctas = fused_quantize_params(fn, quantize, num_tokens, qp);
  const unsigned grid = small_sort_grid(q);
  launch_pdl(small_sort_kernel, dim3(grid + quant_ctas), dim3(small_sort::kThreads), 0, stream, q, qp, grid);
  MOEKIT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace detail

void moe_sort(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts_total, int local_offset,
              int local_count, const MoeSortBuffers& out, void* workspace, size_t workspace_bytes,
              cudaStream_t stream) {
  detail::moe_sort_with_path(detail::MoeSortPath::kAuto, topk_ids, num_tokens, top_k, num_experts_total,
                             local_offset, local_count, out, workspace, workspace_bytes, stream);
}

}  // namespace moekit
