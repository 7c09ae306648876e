// MXFP4 B for the sm90 FP8 GEMM family (docs/design.md §MXFP4 weights): the weights stay 4-bit in
// global memory and in a ring of raw slots in shared memory; a second producer warpgroup expands
// each raw slot into the E4M3 B stage the wgmmas read, so the mainloop, its promotion
// (one FP32 scale per 128 x 128 block, as for FP8 weights) and the epilogues are unchanged.
//
//   load thread        raw slot r:  wait raw_empty, TMA the tile's sub-chunks (codes + shift
//   (warp 0, lane 0)                indices, kMxfp4SubBytes per 32 rows) onto raw_full
//   A load thread      stage s:     wait empty (math done with s), TMA the stage's A and A scales
//   (warp 0, lane 1)                onto full (ATileLoad)
//   expansion threads  stage s:     wait empty and raw_full; expand raw slot r into B stage s;
//   (2nd warpgroup)                 fence for the async proxy; arrive on raw_empty and full
//   math warpgroups    unchanged    wait full (A's arrival and bytes + 128 expansion arrivals)
// The raw loads never wait for A, nor the expansion for A's loads. B-sharing pairs (GEMM1, a
// cluster of two 64-row tiles of one N block): each CTA loads and expands its rank's half of the
// rows, each expansion warp copies what it wrote into the peer's stage (copy_half_to_peer), and the
// A load thread's expected bytes include the peer's half; `empty` counts both CTAs' math warps.
//
// With more raw slots than stages the weights' DRAM reads run further ahead than the expanded
// stages (which cost 4x the bytes of shared memory per K block: raw = kMxRawRows x 68 bytes).
#pragma once
#include "kernels/sm90/fp8_gemm_loaders.cuh"
#include "kernels/sm90/mxfp4_expand.cuh"

namespace moekit::sm90 {

/// Writes expansion table slot g (< kMxfp4TableSlots) at shared address `tables`: the table of
/// shift g + kMxfp4ZeroShift, zeros past kMxfp4Tables.
__device__ __forceinline__ void mxfp4_store_table(u32 tables, u32 g) {
  const Mxfp4Table tb = mxfp4_table(g < kMxfp4Tables ? int(g) + kMxfp4ZeroShift : kMxfp4ZeroShift);
  ptx::st_shared_v2(tables + g * 8u, tb.lo, tb.hi);
}

/// Threads that expand (a second producer warpgroup) and their named barrier.
inline constexpr u32 kMxfp4ExpandThreads = 128;
inline constexpr u32 kMxfp4ExpandBarrier = 4;  // 1: the epilogues', 2 and 3: the math order's

/// The raw ring's shared-memory addresses (fp8_gemm_layout.cuh gemm_mx_region_*).
struct Mxfp4Ring {
  u32 raw;    ///< kMxStages slots of gemm_mx_raw_bytes(kMxRawRows)
  u32 table;  ///< kMxfp4TableSlots expansion tables of 8 bytes (mxfp4_store_table)
  u32 full;   ///< per slot: the load thread's arrival + the TMA bytes
  u32 empty;  ///< per slot: one arrival per expansion thread

  template <class T>
  __device__ __forceinline__ static Mxfp4Ring at(u32 region) {
    Mxfp4Ring r;
    r.raw = region;
    r.table = region + u32(T::kMxStages) * gemm_mx_raw_bytes(T::kMxRawRows);
    r.full = r.table + 256u;
    r.empty = r.full + 8u * u32(T::kMxStages);
    return r;
  }
};

/// TMA rows (of kMxfp4TmaRowBytes) of tile t's raw B: K block kb's box i starts at row
/// y0 + kb * dy + i * dbox. K-block tiled weights (GemmParams::b_chunk_rows = C, a multiple of
/// 128: W1's chunk of C rows per K block is contiguous) load C / 128 boxes of 4 sub-chunks each;
/// row-major weights (sub-chunks of 32 rows per K block, ((row / 32) * num_kb + kb) in order) load
/// one box per sub-chunk. `rows` of the tile are loaded: all, or in B-sharing pairs rank r's half
/// (the r-th half of the tile's boxes).
struct Mxfp4RawWalk {
  u32 y0, dy, dbox, boxes, box_rows;
  __device__ __forceinline__ void init(const GemmParams& p, const Tile& t, u32 rows, u32 rank = 0) {
    const u32 chunk = p.b_chunk_rows;
    if (chunk) {
      const u32 sub_rows = chunk / kMxfp4SubRows * kMxfp4SubTmaRows;
      y0 = t.b_row0 / chunk * p.num_kb * sub_rows;
      dy = sub_rows;
      box_rows = 4u * kMxfp4SubTmaRows;
      dbox = box_rows;
      boxes = rows / (4u * kMxfp4SubRows);
    } else {
      y0 = t.b_row0 / kMxfp4SubRows * p.num_kb * kMxfp4SubTmaRows;
      dy = kMxfp4SubTmaRows;
      box_rows = kMxfp4SubTmaRows;
      dbox = p.num_kb * kMxfp4SubTmaRows;
      boxes = rows / kMxfp4SubRows;
    }
    y0 += rank * boxes * dbox;
  }
};

template <class T>
struct Mxfp4BLoader {
  static_assert(T::kMxfp4, "MXFP4 B only");
  static constexpr u32 kRawBytes = gemm_mx_raw_bytes(T::kMxRawRows);
  /// Expansion jobs per stage (a row's 32 K values) and per thread: one per 32-row sub-chunk.
  static constexpr u32 kJobsPerThread = u32(T::kMxRawRows) * (kGemmBlockK / 32) / kMxfp4ExpandThreads;
  /// B-sharing pairs: the bytes of the half a CTA expands, which its peer's stage receives by copy.
  static constexpr u32 kPeerBytes = T::kCluster > 1 ? u32(T::kMxRawRows) * kGemmBlockK : 0u;
  /// Jobs whose loads are in flight together (registers: T::kExpandRegs).
  static constexpr u32 kBatch = T::kExpandRegs >= 96 ? 8u : T::kExpandRegs >= 56 ? 4u : 2u;
  static_assert(kMxfp4SubRows * 4 == kMxfp4ExpandThreads, "a pass of jobs covers one sub-chunk");

  /// The load thread: every tile's raw B, K block by K block, into the raw ring. Weights only, so it
  /// never waits for the previous kernel (PDL).
  __device__ static void load_raw(const GemmParams& p, const Mxfp4Ring& mx, const ptx::TmaDescriptor& tma_b,
                                  TilePipe& tiles) {
    const ptx::u64 policy = ptx::l2_policy_evict_first();
    const u32 rank = T::kCluster > 1 ? ptx::cluster_ctarank() : 0u;
    u32 slot = 0, phase = 0;
    for (Tile t; tiles.take(t);) {
      Mxfp4RawWalk w;
      w.init(p, t, u32(T::kMxRawRows), rank);
      for (u32 kb = 0; kb < p.num_kb; ++kb) {
        ptx::mbar_wait(mx.empty + 8 * slot, phase ^ 1u);
        const u32 full = mx.full + 8 * slot;
        ptx::mbar_arrive_expect_tx(full, kRawBytes);
        const u32 dst = mx.raw + slot * kRawBytes, y = w.y0 + kb * w.dy;
        for (u32 i = 0; i < w.boxes; ++i) {
          if (p.b_evict_first)
            ptx::tma_load_2d_hint(dst + i * w.box_rows * kMxfp4TmaRowBytes, &tma_b, full, 0, int(y + i * w.dbox),
                                  policy);
          else
            ptx::tma_load_2d(dst + i * w.box_rows * kMxfp4TmaRowBytes, &tma_b, full, 0, int(y + i * w.dbox));
        }
        if (++slot == u32(T::kMxStages)) {
          slot = 0;
          phase ^= 1u;
        }
      }
    }
  }

  /// Expands one raw slot (at `raw`, generic pointer into shared memory) into the 128-byte swizzled
  /// B stage at `b`, exactly as a TMA box of the E4M3 weights would have put them. Thread g takes
  /// jobs g, g + 128, ...: job j = (row j / 4, 32 K values j % 4), so a quarter warp reads 128
  /// consecutive raw bytes (two rows, whose units mxfp4_row_unit swizzles alike) and writes
  /// 16-byte units that the swizzle spreads over all banks. A
  /// thread's rows are g / 4 + 32 i (row g / 4 of sub-chunk i), so its column q, swizzle and
  /// offsets are fixed and each job's addresses are constants apart. kBatch jobs at a time, loads first: plain C++ accesses (not
  /// asm volatile) that the compiler keeps in that order, so their latencies overlap.
  __device__ __forceinline__ static void expand(const ptx::u8* raw, ptx::u8* b, const ptx::u8* table, u32 g) {
    const u32 q = g % 4u, r0 = g / 4u, sw = r0 & 7u;  // rows r0 + 32 i: (r0 + 32 i) & 7 = sw
    const ptx::u8* src = raw + r0 * 64u + mxfp4_row_unit(r0, q) * 16u;  // block q's words (mxfp4_row_unit)
    const ptx::u8* idx_src = raw + kMxfp4CodeBytes + r0 * 4u + q;
    ptx::u8* dst_lo = b + r0 * kGemmBlockK + (((2u * q) ^ sw) << 4);
    ptx::u8* dst_hi = b + r0 * kGemmBlockK + (((2u * q + 1u) ^ sw) << 4);
    // Job i: row r0 of sub-chunk i.
    auto raw_off = [](u32 i) { return i * kMxfp4SubBytes; };
    auto idx_off = [](u32 i) { return i * kMxfp4SubBytes; };
#pragma unroll
    for (u32 i0 = 0; i0 < kJobsPerThread; i0 += kBatch) {
      // A batch's loads all precede its stores (which the compiler may not move loads past).
      const u32 n = kJobsPerThread - i0 < kBatch ? kJobsPerThread - i0 : kBatch;  // (a constant once unrolled)
      uint4 w[kBatch];
      u32 x[kBatch];
#pragma unroll
      for (u32 j = 0; j < kBatch; ++j) {
        if (j >= n) break;
        w[j] = *reinterpret_cast<const uint4*>(src + raw_off(i0 + j));
        x[j] = idx_src[idx_off(i0 + j)] & 0xF8u;  // a table's offset (kMxfp4TableSlots)
      }
      uint2 t[kBatch];
#pragma unroll
      for (u32 j = 0; j < kBatch; ++j)
        if (j < n) t[j] = *reinterpret_cast<const uint2*>(table + x[j]);
#pragma unroll
      for (u32 j = 0; j < kBatch; ++j)
        if (j < n)
          store_expanded(w[j], Mxfp4Table{t[j].x, t[j].y}, dst_lo + (i0 + j) * kMxfp4SubRows * kGemmBlockK,
                         dst_hi + (i0 + j) * kMxfp4SubRows * kGemmBlockK);
    }
  }

  /// A 32-block's four loader words (mxfp4_fragment_word q = 0 … 3) → its 32 E4M3 bytes: the
  /// words' low halves are columns 0 … 15 (to lo), their high halves columns 16 … 31 (to hi).
  __device__ __forceinline__ static void store_expanded(const uint4& w, Mxfp4Table t, ptx::u8* lo, ptx::u8* hi) {
    uint4 a, c;
    mxfp4_expand8(w.x, t, a.x, c.x);
    mxfp4_expand8(w.y, t, a.y, c.y);
    mxfp4_expand8(w.z, t, a.z, c.z);
    mxfp4_expand8(w.w, t, a.w, c.w);
    *reinterpret_cast<uint4*>(lo) = a;
    *reinterpret_cast<uint4*>(hi) = c;
  }

  /// The A load thread (warp 0's lane 1): the A loads of every stage, onto its `full` barrier, as
  /// the FP8 kernels' load warp issues them (ATileLoad); A comes from the previous kernel (PDL).
  __device__ static void load_a(const GemmParams& p, u32 s_a, u32 s_sfa, u32 s_full, u32 s_empty,
                                const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_sfa, TilePipe& tiles) {
    bool waited = p.pdl == 0;
    const u32 a_box = ATileLoad<T>::box_rows(p);
    u32 stage = 0, phase = 0;
    for (Tile t; tiles.take(t);) {
      const ATileLoad<T> al(t, a_box);
      for (u32 kb = 0; kb < p.num_kb; ++kb) {
        ptx::mbar_wait(s_empty + 8 * stage, phase ^ 1u);
        if (!waited) {
          ptx::griddep_wait();
          waited = true;
        }
        const u32 full = s_full + 8 * stage;
        ptx::mbar_arrive_expect_tx(full, al.tx_bytes() + kPeerBytes);  // (+ the peer's half of B)
        al.issue(stage, kb, s_a, s_sfa, full, tma_a, tma_sfa, 0u);
        if (++stage == u32(T::kStages)) {
          stage = 0;
          phase ^= 1u;
        }
      }
    }
  }

  /// B-sharing pairs: warp w of the expansion threads wrote rows 8 w + 32 i (i < kJobsPerThread,
  /// 8 rows each) of its CTA's half at `half` (a B stage's shared address + the half's offset);
  /// lane 0 copies them to the same offsets of the peer's stage, completing bytes on the peer's
  /// `full` barrier (its A load thread expects kPeerBytes). Swizzled 1 KB row groups stay whole.
  __device__ __forceinline__ static void copy_half_to_peer(u32 half, u32 full, u32 warp, u32 peer) {
    const u32 peer_full = ptx::map_to_cta(full, peer);
#pragma unroll
    for (u32 i = 0; i < kJobsPerThread; ++i) {
      const u32 src = half + (8u * warp + i * kMxfp4SubRows) * kGemmBlockK;
      ptx::bulk_copy_to_cta(ptx::map_to_cta(src, peer), src, 8u * kGemmBlockK, peer_full);
    }
  }

  /// Expansion thread g (< kMxfp4ExpandThreads). `smem`: the generic pointer of shared address
  /// `base`; s_b: the B stages; s_full, s_empty: the stages' barriers (`empty` counts the math
  /// warps of both CTAs of a pair, so the peer's stage is free too).
  __device__ static void expand_all(const GemmParams& p, u32 g, ptx::u8* smem, u32 base, u32 s_b, u32 s_full,
                                    u32 s_empty, const Mxfp4Ring& mx, TilePipe& tiles) {
    if (g < kMxfp4TableSlots) mxfp4_store_table(mx.table, g);
    ptx::named_barrier_sync(kMxfp4ExpandBarrier, kMxfp4ExpandThreads);
    const ptx::u8* table = smem + (mx.table - base);
    const u32 rank = T::kCluster > 1 ? ptx::cluster_ctarank() : 0u;
    const u32 half = rank * kPeerBytes;  // this CTA's rows within a B stage
    u32 stage = 0, phase = 0, slot = 0, slot_phase = 0;
    for (Tile t; tiles.take(t);) {
      for (u32 kb = 0; kb < p.num_kb; ++kb) {
        ptx::mbar_wait(s_empty + 8 * stage, phase ^ 1u);
        ptx::mbar_wait(mx.full + 8 * slot, slot_phase);
        const u32 b = s_b + stage * T::kSmemB + half;
        expand(smem + (mx.raw + slot * kRawBytes - base), smem + (b - base), table, g);
        // The stage's bytes were written by the generic proxy and are read by wgmma and by the
        // copy to the peer (async proxy).
        ptx::fence_proxy_async_smem();
        if constexpr (T::kCluster > 1) {
          __syncwarp();
          if (g % 32u == 0) copy_half_to_peer(b, s_full + 8 * stage, g / 32u, rank ^ 1u);
        }
        ptx::mbar_arrive(mx.empty + 8 * slot);
        ptx::mbar_arrive(s_full + 8 * stage);
        if (++slot == u32(T::kMxStages)) {
          slot = 0;
          slot_phase ^= 1u;
        }
        if (++stage == u32(T::kStages)) {
          stage = 0;
          phase ^= 1u;
        }
      }
    }
  }
};

}  // namespace moekit::sm90
