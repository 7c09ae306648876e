// The producer side's shared pieces of the sm90 FP8 GEMM family: the PDL wait, the B tile walk,
// the tile pipe between the scheduler warp and its consumers, and the gathered-A loader of the MoE
// GEMM1 (the load warp itself is fp8_gemm_mainloop.cuh's).
#pragma once
#include "kernels/sm90/fp8_gemm_traits.cuh"
#include "kernels/sm90/scheduler.cuh"

namespace moekit::sm90 {

/// PDL, producer side: waits for the previous kernel (GemmParams::pdl) at the one point of the
/// prologue that applies — before the scheduler reads anything (`after_schedule` false), or, with
/// pdl_early, after it has found the first tile (`after_schedule` true).
__device__ __forceinline__ void pdl_wait_at(const GemmParams& p, bool after_schedule) {
  if (p.pdl && (p.pdl_early != 0) == after_schedule) ptx::griddep_wait();
}

/// TMA coordinates of tile t's B, K block kb = (x0 + kb * dx, y0 + kb * dy): row-major B walks
/// along K, the K-block tiled layout (GemmParams::b_chunk_rows) from chunk to chunk. Computed once
/// per tile, so the producer's K loop stays free of divisions.
struct BTileWalk {
  u32 y0, dx, dy;
  __device__ __forceinline__ BTileWalk(const GemmParams& p, const Tile& t) {
    const u32 chunk = p.b_chunk_rows;
    if (chunk) {
      y0 = (t.b_row0 / chunk) * p.num_kb * chunk + t.b_row0 % chunk;
      dx = 0;
      dy = chunk;
    } else {
      y0 = t.b_row0;
      dx = kGemmBlockK;
      dy = 0;
    }
  }
};

/// A tile's A loads for one K block: its A boxes and A-scale boxes onto a stage's `full` mbarrier
/// (by the load warp's elected lane; with MXFP4 B by the A load thread, mxfp4_loader.cuh).
template <class T>
struct ATileLoad {
  u32 m0, box, rows, sfa_boxes;
  /// Rows per A box (GemmParams::a_box_rows): computed once per kernel.
  __device__ __forceinline__ static u32 box_rows(const GemmParams& p) {
    return p.a_box_rows ? p.a_box_rows : u32(T::kBlockM);
  }
  __device__ __forceinline__ ATileLoad(const Tile& t, u32 a_box) : m0(t.m0), box(a_box) {
    // The valid rows rounded up to whole boxes (a ghost tile loads none).
    const u32 need = (t.valid_rows + box - 1) / box * box;
    rows = need < u32(T::kBlockM) ? need : u32(T::kBlockM);
    // A-scale boxes: one per wave with valid rows (at least one, as a ghost tile's barrier still
    // expects bytes).
    sfa_boxes = T::kWaves > 1 && rows > 128u ? u32(T::kWaves) : 1u;
  }
  /// Bytes these loads deliver per K block.
  __device__ __forceinline__ u32 tx_bytes() const {
    return rows * kGemmBlockK + sfa_boxes * gemm_sfa_box(T::kBlockM) * 4u;
  }
  /// Loads K block kb into stage `st` (A stages at s_a, A-scale stages at s_sfa); `rank`: this CTA's
  /// rank in its cluster.
  __device__ __forceinline__ void issue(u32 st, u32 kb, u32 s_a, u32 s_sfa, u32 full, const ptx::TmaDescriptor& tma_a,
                                        const ptx::TmaDescriptor& tma_sfa, u32 rank) const {
    for (u32 r = 0, b = 0; r < rows; r += box, ++b) {
      if constexpr (T::kShareA) {
        // Box i comes from rank i % kCluster, into the same stage of every CTA (a one-wave tile's
        // single box from rank 0).
        if (b % u32(T::kCluster) == rank)
          ptx::tma_load_2d_multicast(s_a + st * T::kSmemA + r * kGemmBlockK, &tma_a, full, int(kb * kGemmBlockK),
                                     int(m0 + r), ptx::u16((1u << T::kCluster) - 1));
      } else {
        ptx::tma_load_2d(s_a + st * T::kSmemA + r * kGemmBlockK, &tma_a, full, int(kb * kGemmBlockK), int(m0 + r));
      }
    }
    for (u32 w = 0; w < sfa_boxes; ++w)
      ptx::tma_load_2d(s_sfa + st * T::kSmemSfa + w * gemm_sfa_wave_floats(T::kBlockM) * 4u, &tma_sfa, full,
                       int((m0 + w * 128u) & ~3u), int(kb));
  }
};

/// The tile pipe: the scheduler warp runs the scheduler and publishes each tile (its lane 0 writes
/// the record), then an end marker, into a ring of kGemmTileSlots records in shared memory; the load warp and the math
/// warpgroups take them in the same order. Per slot a `full` mbarrier (one arrival per scheduler
/// lane, kGemmTilePublishers) and an `empty` one (one arrival by every thread that takes the records).
/// Only one warp schedules, so a scheduler may take tiles dynamically (one atomic per tile) and
/// nobody else repeats its searches; it runs ahead by up to the ring's depth. A math warp keeps its slot until
/// the tile's epilogue is done and reads the record again there (peek), so the tile's fields need
/// not stay in registers across the K loop.
struct TilePipe {
  u32 records;  ///< shared address of kGemmTileSlots x kGemmTileRecordBytes
  u32 slot = 0, phase = 0;

  __device__ __forceinline__ u32 full() const { return records + kGemmTileSlots * kGemmTileRecordBytes; }
  __device__ __forceinline__ u32 empty() const { return full() + 8 * kGemmTileSlots; }
  __device__ __forceinline__ void advance() {
    if (++slot == kGemmTileSlots) {
      slot = 0;
      phase ^= 1u;
    }
  }

  /// Shared address of the held slot's staged B scales (gemm_sb_stage_floats(BLOCK_M, BLOCK_N) floats).
  __device__ __forceinline__ u32 staged_sb(u32 stage_floats) const {
    return records + gemm_sb_stage_offset() + slot * stage_floats * 4u;
  }

  /// The scheduler warp, all lanes in step: publishes `t` (more = false: the end marker, t
  /// ignored). With kStageSb, and rows of at most kGemmMaxStagedKb K blocks, the lanes first copy
  /// the tile's B-scale rows (T::kSbRowsStaged of them, from the tile's first scale block) into the
  /// slot, so the math threads read them from shared memory: no L1 miss in the K loop, and the
  /// global latency lies with this warp, which runs ahead of the math by up to the pipe's depth.
  template <class T>
  __device__ __forceinline__ void push(const Tile& t, bool more, const GemmParams& p) {
    ptx::mbar_wait(empty() + 8 * slot, phase ^ 1u);
    const u32 lane = ptx::lane_id();
    if constexpr (T::kStageSb) {
      if (more && p.num_kb <= kGemmMaxStagedKb) {
        const u32 blk0 = min(t.n0 / u32(T::kSbRows), p.num_n_sb - 1u);
        const float* row0 = p.sb + t.sb_offset + blk0 * p.num_kb;
        const u32 dst = staged_sb(T::kSbStageFloats);
#pragma unroll
        for (u32 r = 0; r < T::kSbRowsStaged; ++r) {
          // (Clamped: the last block's row again past N.)
          const float* row = row0 + (blk0 + r < p.num_n_sb ? r * p.num_kb : 0u);
          for (u32 kb = lane; kb < p.num_kb; kb += 32)
            ptx::st_shared_f32(dst + (r * kGemmMaxStagedKb + kb) * 4u, __ldg(row + kb));
        }
      }
    }
    if (lane == 0) {
      const u32 r = records + slot * kGemmTileRecordBytes;
      ptx::st_shared_v4(r, {t.m0, t.n0, t.b_row0, t.sb_offset});
      ptx::st_shared_v4(r + 16, {t.valid_rows, (more ? 1u : 0u) | (t.solo << 1) | (t.fixups << 2), t.kb_begin, t.kb_end});
    }
    // Every lane arrives (kGemmTilePublishers), releasing its own stores: the record and the
    // staged scales are visible to the threads that wait on the slot.
    ptx::mbar_arrive(full() + 8 * slot);
    advance();
  }

  /// The record of the slot this thread holds; false for the end marker.
  __device__ __forceinline__ bool peek(Tile& t) const {
    const u32 r = records + slot * kGemmTileRecordBytes;
    u32 a[4], b[4];
    ptx::ld_shared_v4(r, a);
    ptx::ld_shared_v4(r + 16, b);
    t.m0 = a[0];
    t.n0 = a[1];
    t.b_row0 = a[2];
    t.sb_offset = a[3];
    t.valid_rows = b[0];
    t.kb_begin = b[2];
    t.kb_end = b[3];
    t.solo = (b[1] >> 1) & 1u;
    t.fixups = b[1] >> 2;
    return (b[1] & 1u) != 0;
  }

  /// Math, load or gather thread: waits for the next record and reads it (the slot stays held
  /// until release).
  __device__ __forceinline__ bool pop(Tile& t) {
    ptx::mbar_wait(full() + 8 * slot, phase);
    return peek(t);
  }

  /// pop and release at once, for a thread that needs the record only until its next take: false
  /// for the end marker.
  __device__ __forceinline__ bool take(Tile& t) {
    const bool more = pop(t);
    release();
    return more;
  }

  /// take for a whole warp (every lane arrives, as release requires), with the record broadcast
  /// from lane 0 so that ptxas keeps its fields in uniform registers: a load warp then issues its
  /// TMA copies from uniform operands, with no per-copy loop over the lanes' values.
  __device__ __forceinline__ bool take_uniform(Tile& t) {
    const bool more = take(t);
    t.m0 = ptx::warp_uniform(t.m0);
    t.n0 = ptx::warp_uniform(t.n0);
    t.b_row0 = ptx::warp_uniform(t.b_row0);
    t.sb_offset = ptx::warp_uniform(t.sb_offset);
    t.valid_rows = ptx::warp_uniform(t.valid_rows);
    t.kb_begin = ptx::warp_uniform(t.kb_begin);
    t.kb_end = ptx::warp_uniform(t.kb_end);
    t.solo = ptx::warp_uniform(t.solo);
    t.fixups = ptx::warp_uniform(t.fixups);
    return ptx::warp_uniform(more ? 1u : 0u) != 0;
  }

  /// Hands the held slot back to the scheduler thread. Every thread that read the record arrives
  /// itself (with one arrival per warp after __syncwarp, compute-sanitizer racecheck reported the
  /// other lanes' record reads as racing with the next push; docs/performance.md §Warp-uniform descriptors and the wgmma serialization guard).
  __device__ __forceinline__ void release() {
    ptx::mbar_arrive(empty() + 8 * slot);
    advance();
  }
};

/// The gather variant's A loads (the MoE GEMM1 on token-major activations, MoeGemm1Params::a_gather):
/// the producer warpgroup's warps 2 and 3 (64 threads) copy each tile row's 128-byte K block from
/// its token's row with cp.async into the 128-byte swizzled stage, exactly where a TMA box would
/// put it; then one arrival per thread on the stage's `full` barrier once its copies have landed
/// (the math threads read the A scales from global memory). Thread g copies the 16-byte chunks
/// g % 4 and g % 4 + 4 of rows g / 4 + 16 j (four rows per thread keep the producer's 40 registers
/// spill-free; a warp instruction reads eight half rows). Rows past the tile's valid rows keep
/// stale bytes (their results are never stored), as with the 8-row TMA boxes; K past `k` is
/// zero-filled. (One one-row TMA box per row and K block instead measured GEMM1 +44% at T = 4096
/// against these copies, docs/performance.md §Gather vs permute.)
inline constexpr u32 kGatherThreads = 64;

template <class T>
struct GatherALoader {
  static constexpr u32 kRows = u32(T::kBlockM) / 16;  // rows per thread
  static constexpr u32 kNone = ~0u;
  static_assert(T::kBlockM == 64, "the gather variant runs 64-row tiles");

  __device__ __forceinline__ static void run(const MoeGemm1Params& p, u32 g, u32 s_a, u32 s_full, u32 s_empty,
                                             TilePipe& tiles) {
    // The activations come from the previous kernel; the row map, under pdl_early, is as old as
    // the group layout, so the first tile's tokens are looked up before the wait.
    bool waited = p.pdl == 0;
    if (!waited && !p.pdl_early) {
      ptx::griddep_wait();
      waited = true;
    }
    const u32 sub = g % 4, row0 = g / 4;
    u32 stage = 0, phase = 0;
    for (;;) {
      Tile t;
      const bool more = tiles.pop(t);
      u32 token[kRows];  // byte offset of the row's token in a_gather (< 2^32, host-checked), or kNone
#pragma unroll
      for (u32 j = 0; j < kRows; ++j) {
        const u32 r = row0 + 16 * j;
        token[j] = kNone;
        if (more && r < t.valid_rows) {
          const int e = ptx::ld_chain(p.row_map + t.m0 + r);
          if (e >= 0) token[j] = u32(e) / p.top_k * p.a_gather_ld;
        }
      }
      if (!waited) {
        ptx::griddep_wait();
        waited = true;
      }
      tiles.release();
      if (!more) break;
      for (u32 kb = 0; kb < p.num_kb; ++kb) {
        ptx::mbar_wait(s_empty + 8 * stage, phase ^ 1u);
        const u32 a_stage = s_a + stage * T::kSmemA;
#pragma unroll
        for (u32 h = 0; h < 2; ++h) {
          const u32 chunk = sub + 4 * h;
          const u32 col = kb * kGemmBlockK + chunk * 16;
          const u32 bytes = col < p.k ? 16u : 0u;  // k is a multiple of 16
          const u32 src_col = bytes ? col : 0u;
#pragma unroll
          for (u32 j = 0; j < kRows; ++j) {
            if (token[j] == kNone) continue;
            const u32 r = row0 + 16 * j;
            ptx::cp_async_16(a_stage + r * kGemmBlockK + ((chunk ^ (r & 7u)) << 4), p.a_gather + (token[j] + src_col),
                             bytes);
          }
        }
        ptx::cp_async_mbar_arrive_noinc(s_full + 8 * stage);
        if (++stage == T::kStages) {
          stage = 0;
          phase ^= 1u;
        }
      }
    }
  }
};

}  // namespace moekit::sm90
