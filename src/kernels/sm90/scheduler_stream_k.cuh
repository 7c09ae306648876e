// Stream-K for the MXFP4 decode GEMMs (mxfp4_decode_gemm.cuh): the work is every non-empty tile of
// the contiguous expert layout times its K blocks, and each CTA takes an equal share of it.
//
// Why: at decode sizes a grid of whole tiles leaves SMs idle and is paced by the slowest CTA (the
// gpt-oss-120b layer at T = 1 has 92 tiles of 23 K blocks for 132 SMs: ncu, H100, the GEMMs' K
// loops were paced by their math, so 40 SMs idle were 40 SMs of math lost). With stream-K every CTA
// runs about tiles x num_kb / G K blocks.
//
// Work units are numbered tile-major (tile i's K blocks are units [i num_kb, (i + 1) num_kb));
// tiles are numbered by M tile (expert by expert, kTok rows each), N block fastest. CTA c of the
// first G' = min(gridDim.x, units) takes units [c U / G', (c + 1) U / G'), so every range is
// non-empty and consecutive CTAs hold consecutive ranges. A CTA's range yields pieces: the tail of a
// tile begun by a lower CTA (its first piece, if its range starts inside a tile), whole tiles, and
// the head of a tile that higher CTAs continue. The CTA holding a tile's first K block owns the
// tile: for an epilogue that needs the whole sum (GEMM1's SwiGLU) the other CTAs hand it their
// partial sums through a global workspace (StreamKPartials); an additive epilogue (GEMM2's
// scatter-add) lets each piece add its own.
// The handed-over piece is the first thing its CTA computes and the owner's the last, so the owner
// rarely waits; it waits only on CTAs of the same launch that need nothing from it (no cycle), and
// the grid never exceeds the SMs (one CTA each), so all of them run.
#pragma once
#include "kernels/sm90/scheduler.cuh"
#include "ptx/ptx_memory.cuh"

namespace moekit::sm90 {

/// kTok-row M tiles x kRows-row N blocks over the contiguous layout (GroupedLayoutParams: 128-aligned
/// segment starts), in stream-K pieces (Tile::kb_begin / kb_end / fixups). Run by the scheduler
/// warp, all lanes in step. Needs num_groups <= kStreamKMaxGroups (32 rounds of 32 groups; the host
/// checks).
template <int kTok, int kRows, class P = GroupedLayoutParams>
struct StreamKScheduler {
  const P& p;
  u32 n_blocks;
  u32 round_base = 0;  // lane r: M tiles of the groups before round r (groups [32 r, 32 r + 32))
  u32 units = 0, ctas = 0, cursor = 0, end = 0;

  __device__ __forceinline__ static void init_shared(u32) {}

  /// M tiles of group g (its valid rows, within its segment and below p.m, in kTok-row tiles); 0
  /// past the last group.
  __device__ __forceinline__ u32 m_tiles(u32 g, int& seg_start, int& rows) const {
    seg_start = 0;
    rows = 0;
    if (g >= p.num_groups) return 0u;
    seg_start = ptx::ld_chain(p.group_offsets + g);
    const int seg_end = ptx::ld_chain(p.group_offsets + g + 1);
    rows = ptx::ld_chain(p.group_counts + g);
    rows = min(rows, min(seg_end, int(p.m)) - seg_start);
    return rows > 0 ? (u32(rows) + kTok - 1) / kTok : 0u;
  }

  /// Inclusive prefix sum over the warp's lanes.
  __device__ __forceinline__ static u32 warp_inclusive_sum(u32 v) {
    const u32 lane = ptx::lane_id();
#pragma unroll
    for (u32 d = 1; d < 32; d *= 2) {
      const u32 o = __shfl_up_sync(0xffffffffu, v, d);
      if (lane >= d) v += o;
    }
    return v;
  }

  /// Every group read once, lane l of round r reading group 32 r + l; the loads of kBatch rounds go
  /// out before any is used (one round trip per batch instead of per round).
  __device__ __forceinline__ explicit StreamKScheduler(const P& params, u32 = 0)
      : p(params), n_blocks((params.n + kRows - 1) / kRows) {
    constexpr u32 kBatch = 4;  // (the scheduler warp has 40 registers)
    const u32 lane = ptx::lane_id(), rounds = (p.num_groups + 31) / 32;
    u32 carry = 0;
    for (u32 r0 = 0; r0 < rounds; r0 += kBatch) {
      int start[kBatch], end_[kBatch], count[kBatch];
#pragma unroll
      for (u32 i = 0; i < kBatch; ++i) {
        const u32 g = 32 * (r0 + i) + lane;
        const bool in = g < p.num_groups;
        start[i] = in ? ptx::ld_chain(p.group_offsets + g) : 0;
        end_[i] = in ? ptx::ld_chain(p.group_offsets + g + 1) : 0;
        count[i] = in ? ptx::ld_chain(p.group_counts + g) : 0;
      }
#pragma unroll
      for (u32 i = 0; i < kBatch; ++i) {
        const int rows = min(count[i], min(end_[i], int(p.m)) - start[i]);
        const u32 total = __reduce_add_sync(0xffffffffu, rows > 0 ? (u32(rows) + kTok - 1) / kTok : 0u);
        if (lane == r0 + i) round_base = carry;
        carry += total;
      }
    }
    units = carry * n_blocks * p.num_kb;
    ctas = min(gridDim.x, units);
    if (blockIdx.x < ctas) {
      cursor = u32(static_cast<unsigned long long>(blockIdx.x) * units / ctas);
      end = u32(static_cast<unsigned long long>(blockIdx.x + 1) * units / ctas);
    }
  }

  /// The group of M tile `mi` and the tile's index inside it (one round of loads).
  __device__ __forceinline__ void locate(u32 mi, u32& g, u32& j, int& seg_start, int& rows) const {
    const u32 lane = ptx::lane_id(), rounds = (p.num_groups + 31) / 32;
    const u32 r = 31 - __clz(__ballot_sync(0xffffffffu, lane < rounds && round_base <= mi));
    const u32 base = __shfl_sync(0xffffffffu, round_base, r);
    int start_l, rows_l;
    const u32 t_l = m_tiles(32 * r + lane, start_l, rows_l);
    const u32 incl = warp_inclusive_sum(t_l);
    const u32 k = mi - base;
    const u32 hit = __ffs(__ballot_sync(0xffffffffu, incl - t_l <= k && k < incl)) - 1;
    g = 32 * r + hit;
    j = k - __shfl_sync(0xffffffffu, incl - t_l, hit);
    seg_start = __shfl_sync(0xffffffffu, start_l, hit);
    rows = __shfl_sync(0xffffffffu, rows_l, hit);
  }

  __device__ __forceinline__ bool next(Tile& t) {
    if (cursor >= end) return false;
    const u32 nkb = p.num_kb;
    const u32 tile = cursor / nkb;
    const u32 tile_end = (tile + 1) * nkb;
    t.kb_begin = cursor - tile * nkb;
    t.kb_end = min(end, tile_end) - tile * nkb;
    cursor = min(end, tile_end);
    // The owner's helpers: the CTAs after this one whose ranges start inside the tile (the last is
    // the CTA holding the tile's last unit).
    t.fixups = 0;
    if (t.kb_begin == 0 && t.kb_end < nkb) {
      const u32 last = u32((static_cast<unsigned long long>(tile_end) * ctas - 1) / units);
      t.fixups = last - blockIdx.x;
    }
    u32 g, j;
    int seg_start, rows;
    locate(tile / n_blocks, g, j, seg_start, rows);
    t.m0 = u32(seg_start) + j * kTok;
    t.n0 = (tile % n_blocks) * kRows;
    t.solo = 0;
    const int valid = rows - int(j * kTok);
    t.valid_rows = valid < kTok ? u32(valid) : u32(kTok);
    set_group(t, p, g);
    return true;
  }
};

/// The hand-over of stream-K partial sums (StreamKScheduler) between the math threads of two CTAs:
/// CTA c's slot holds kRowsA x kRowsB floats per math thread (float i of thread t at [c][i][t],
/// coalesced) and a flag that the forward zeroes before the kernel (once set it stays set: each
/// CTA hands over at most one piece per launch).
template <u32 kThreads, int kRowsA, int kRowsB>
struct StreamKPartials {
  static constexpr u32 kCount = u32(kRowsA * kRowsB);
  float* partials;  ///< [CTAs][kCount][kThreads]
  unsigned* flags;  ///< [CTAs]

  /// Every math thread (tid < kThreads; named barrier `bar` over them): stores `out` as CTA `cta`'s
  /// partial sums and publishes them. The barrier orders every thread's stores before thread 0's
  /// fence and release store (the pattern of a cooperative grid sync).
  __device__ __forceinline__ void publish(const float (&out)[kRowsA][kRowsB], u32 cta, u32 tid, u32 bar) const {
    float* slot = partials + static_cast<unsigned long long>(cta) * kCount * kThreads + tid;
#pragma unroll
    for (int a = 0; a < kRowsA; ++a)
#pragma unroll
      for (int b = 0; b < kRowsB; ++b) ptx::st_global_cg_f32(slot + u32(a * kRowsB + b) * kThreads, out[a][b]);
    ptx::named_barrier_sync(bar, kThreads);
    if (tid == 0) {
      ptx::fence_acq_rel_gpu();
      ptx::st_release_gpu_u32(flags + cta, 1u);
    }
  }

  /// Every math thread: adds the partial sums of CTAs first, ..., first + n - 1 to `out` in that
  /// order (the same sum every run), once each is published.
  __device__ __forceinline__ void gather(float (&out)[kRowsA][kRowsB], u32 first, u32 n, u32 tid, u32 bar) const {
    if (tid == 0) {
      for (u32 c = first; c < first + n; ++c)
        while (ptx::ld_acquire_gpu_u32(flags + c) == 0u) ptx::nanosleep(32);
      ptx::fence_acq_rel_gpu();
    }
    ptx::named_barrier_sync(bar, kThreads);
    for (u32 c = first; c < first + n; ++c) {
      const float* slot = partials + static_cast<unsigned long long>(c) * kCount * kThreads + tid;
#pragma unroll
      for (int a = 0; a < kRowsA; ++a)
#pragma unroll
        for (int b = 0; b < kRowsB; ++b) out[a][b] += ptx::ld_global_cg_f32(slot + u32(a * kRowsB + b) * kThreads);
    }
  }
};

}  // namespace moekit::sm90
