// Persistent tile schedulers for the sm90 GEMM family.
//
// A scheduler hands each CTA its output tiles in order: next(tile) returns false once the CTA has
// no more. One warp per CTA (the scheduler warp) runs it, all 32 lanes converged and computing the
// same tiles (a scheduler may use warp collectives), and it publishes each tile to the load warp
// (with MXFP4 B: the load threads) and the math warpgroups through the tile pipe
// (fp8_gemm_loaders.cuh). Grouped (MoE) schedulers plug in here with the same interface; the
// mainloop never changes.
#pragma once
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "ptx/ptx.cuh"

namespace moekit::sm90 {

using ptx::u32;

/// One output tile: where A, B and D start, and the offset of its group's B scales.
struct Tile {
  u32 m0;          ///< first row of A and D
  u32 n0;          ///< first column of D (within the group)
  u32 b_row0;      ///< first row of B in the (stacked) B tensor
  u32 sb_offset;   ///< offset of this group's B scales in GemmParams::sb
  u32 valid_rows;  ///< rows of the tile that belong to its group (< BLOCK_M: the rest must not be written)
  /// Split-K (Fp8GemmTraits::kSplitK > 1) only: this CTA's K blocks [kb_begin, kb_end) of the tile.
  u32 kb_begin = 0, kb_end = 0;
  /// B-multicast pairs (clusters along M) only: 1 = this CTA loads the tile's whole B itself and
  /// multicasts nothing; its peer runs another tile of the same rows (MoeGemm1Params::pair_tail_split).
  u32 solo = 0;
  /// Stream-K (StreamKScheduler) only: on the piece that starts the tile (kb_begin = 0), the number
  /// of following CTAs whose first piece continues this tile; the piece's CTA adds their FP32
  /// partial sums before the epilogue (StreamKPartials).
  u32 fixups = 0;
};

/// Identity of a math thread inside the CTA.
struct MathThread {
  u32 warpgroup;  ///< math warpgroup index
  u32 wm, wn;     ///< its position in the tile: rows [64 wm, 64 wm + 64), column slice wn
  u32 warp;       ///< warp within the warpgroup
  u32 lane;
};

/// Rasterized tile order shared by the schedulers: tiles visited in groups of `group` M blocks
/// (of num_m); inside a group the M block changes fastest, so concurrently running CTAs share B
/// tiles and a few A tiles in L2.
__device__ __forceinline__ void raster(u32 idx, u32 num_m, u32 num_n, u32 group, u32& m_block, u32& n_block) {
  const u32 per_group = group * num_n;
  const u32 g = idx / per_group;
  const u32 first_m = g * group;
  const u32 rows_in_group = (num_m - first_m) < group ? (num_m - first_m) : group;
  const u32 r = idx - g * per_group;
  m_block = first_m + r % rows_in_group;
  n_block = r / rows_in_group;
}

/// The static schedule's tail (DenseGemmFields / GroupedLayoutParams::tail_halves): of `tiles`
/// tiles taken by `ctas` CTAs in strides, the last partial wave's tiles become two half units each
/// (64 rows of a 128-row tile, 128 of a 256-row one) when they fit in one wave that way. Units
/// [0, full) are whole tiles; unit full + 2 j + h is half h of tile full + j.
struct TailHalves {
  u32 full = 0xffffffffu;  ///< first half unit (none: all units whole)
  u32 units = 0;           ///< units in all

  TailHalves() = default;
  __device__ __forceinline__ TailHalves(u32 tiles, u32 ctas, bool enabled) : units(tiles) {
    const u32 whole = tiles / ctas * ctas, tail = tiles - whole;
    if (enabled && tail > 0 && 2 * tail <= ctas) {
      full = whole;
      units = whole + 2 * tail;
    }
  }
  /// The tile of unit `idx`, and which part of it: 0 whole, 1 its first half of rows, 2 the second.
  __device__ __forceinline__ u32 tile_of(u32 idx, u32& part) const {
    if (idx < full) {
      part = 0;
      return idx;
    }
    part = 1 + (idx - full) % 2;
    return full + (idx - full) / 2;
  }
};

/// Rows of the part (TailHalves::tile_of) of a tile of 2 x kHalf rows with `valid` valid rows: its
/// first row offset and its valid rows (≤ 0: nothing to do).
template <u32 kHalf>
__device__ __forceinline__ int tile_part_rows(u32 part, int valid, u32& row_offset) {
  row_offset = part == 2 ? kHalf : 0u;
  if (part == 0) return valid;
  const int v = valid - int(row_offset);
  return v < int(kHalf) ? v : int(kHalf);
}

/// Dense GEMM: tiles of an M x N output, visited in groups of `raster_group` M blocks; within a
/// group the M block changes fastest, so concurrently running CTAs share B tiles and a few A tiles
/// in L2.
/// With clusters of kCluster CTAs (TMA multicast of B), the unit of work is kCluster vertically
/// adjacent tiles with the same N block; CTA rank r of a cluster takes the r-th. Both CTAs of a
/// cluster therefore walk the same number of units; a unit hanging past M computes a ghost tile
/// whose loads are zero-filled and whose stores TMA clips away. 256-row tiles pair along N instead
/// (multicast of A, gemm_cluster_shares_a): the unit is two horizontally adjacent tiles with the
/// same rows, and a unit hanging past N gives rank 1 a ghost tile that loads its share of A for
/// rank 0 and stores nothing. Tail halves split a unit's rows, so both ranks take the same half.
/// Split-K (kSplitK > 1, clusters of kSplitK CTAs along K, kCluster = 1): the unit is one tile, and
/// the CTA of cluster rank r computes its r-th share of the K blocks (the shares differ by at most
/// one block; the host requires kSplitK <= num_kb); rank 0 adds the others' partial sums
/// (SplitKReduce) and stores the tile.
template <int kBlockM, int kBlockN, int kCluster = 1, int kSplitK = 1>
struct DenseScheduler {
  static_assert(kSplitK == 1 || kCluster == 1, "split-K clusters do not multicast");
  static constexpr u32 kClusterSize = u32(kCluster * kSplitK);
  static constexpr bool kPairN = gemm_cluster_shares_a(kBlockM, kCluster);
  static constexpr u32 kUnitM = kPairN || kSplitK > 1 ? 1u : u32(kCluster);  // tiles per unit along M
  static constexpr u32 kUnitN = kPairN ? u32(kCluster) : 1u;                   // ... and along N
  /// Tail halves (DenseGemmFields::tail_halves) for units of whole rows of 128- or 256-row tiles.
  static constexpr bool kHalves = kBlockM >= 128 && kUnitM == 1 && kSplitK == 1;
  u32 num_units_m, num_n_units, num_units, group, rank, stride;
  u32 next_index;
  u32 kb_begin = 0, kb_end = 0;
  u32 m;
  TailHalves tail;

  __device__ __forceinline__ static void init_shared(u32) {}

  __device__ __forceinline__ explicit DenseScheduler(const DenseGemmParams& p, u32 = 0)
      : num_units_m(((p.m + kBlockM - 1) / kBlockM + kUnitM - 1) / kUnitM),
        num_n_units(((p.n + kBlockN - 1) / kBlockN + kUnitN - 1) / kUnitN),
        num_units(num_units_m * num_n_units),
        group(p.raster_group >= kUnitM ? p.raster_group / kUnitM : 1),
        rank(blockIdx.x % kClusterSize),
        stride(gridDim.x / kClusterSize),
        next_index(blockIdx.x / kClusterSize),
        m(p.m),
        tail(num_units, stride, kHalves && p.tail_halves != 0) {
    if constexpr (kSplitK > 1) {
      kb_begin = rank * p.num_kb / u32(kSplitK);
      kb_end = (rank + 1) * p.num_kb / u32(kSplitK);
    }
  }

  __device__ __forceinline__ bool next(Tile& t) {
    for (;;) {
      if (next_index >= tail.units) return false;
      u32 part = 0;
      const u32 idx = tail.tile_of(next_index, part);
      next_index += stride;
      u32 m_unit, n_unit;
      raster(idx, num_units_m, num_n_units, group, m_unit, n_unit);
      const u32 m_block = kUnitM > 1 ? m_unit * kUnitM + rank : m_unit;
      const u32 n_block = kUnitN > 1 ? n_unit * kUnitN + rank : n_unit;
      // A whole tile's M tail is clipped by the TMA store; a half tile stores its valid rows only.
      u32 offset;
      const int rows = tile_part_rows<kBlockM / 2>(part, part ? int(m - m_block * kBlockM) : kBlockM, offset);
      if (rows <= 0) continue;  // the second half of a tile past M
      t.m0 = m_block * kBlockM + offset;
      t.n0 = n_block * kBlockN;
      t.b_row0 = t.n0;
      t.sb_offset = 0;
      t.valid_rows = u32(rows);
      t.kb_begin = kb_begin;
      t.kb_end = kb_end;
      return true;
    }
  }
};

/// Fills the group-dependent fields of a tile of group `g`.
__device__ __forceinline__ void set_group(Tile& t, const GemmParams& p, u32 g) {
  t.b_row0 = g * p.n + t.n0;
  t.sb_offset = g * p.num_n_sb * p.num_kb;
}

/// Dynamic units for a 2-CTA cluster: rank 0's scheduler thread claims each unit (one atomic) and
/// hands the index to rank 1's through a ring of kSlots words in rank 1's shared memory, so both
/// CTAs take the same units in the same order. Per slot a `full` mbarrier in rank 1 (rank 0's
/// release.cluster arrival after its remote store) and an `empty` one in rank 0 (rank 1's arrival
/// once it has read the word). Lives at `base` (kGemmPairClaimsBytes of the tile pipe's region);
/// init() runs on one thread of each CTA before the cluster's first barrier.
struct PairClaims {
  static constexpr u32 kSlots = 4;
  static_assert(kSlots * 20 <= kGemmPairClaimsBytes, "the ring's barriers and values");
  u32 base = 0;
  u32 slot = 0, phase = 0;

  __device__ __forceinline__ u32 full(u32 i) const { return base + 8 * i; }
  __device__ __forceinline__ u32 empty(u32 i) const { return base + 8 * (kSlots + i); }
  __device__ __forceinline__ u32 value(u32 i) const { return base + 16 * kSlots + 4 * i; }

  __device__ __forceinline__ void init() const {
    for (u32 i = 0; i < kSlots; ++i) {
      ptx::mbar_init(full(i), 1);
      ptx::mbar_init(empty(i), 1);
    }
  }
  /// Rank 0: publishes `v` to rank 1.
  __device__ __forceinline__ void send(u32 v) {
    ptx::mbar_wait(empty(slot), phase ^ 1u);
    ptx::st_shared_cluster_u32(ptx::map_to_cta(value(slot), 1), v);
    ptx::mbar_arrive_cluster_release(ptx::map_to_cta(full(slot), 1));
    advance();
  }
  /// Rank 1: the next value rank 0 published.
  __device__ __forceinline__ u32 receive() {
    ptx::mbar_wait_cluster(full(slot), phase);
    const u32 v = __float_as_uint(ptx::ld_shared_f32(value(slot)));  // the word's bits
    ptx::mbar_arrive_cluster(ptx::map_to_cta(empty(slot), 0));
    advance();
    return v;
  }
  __device__ __forceinline__ void advance() {
    if (++slot == kSlots) {
      slot = 0;
      phase ^= 1u;
    }
  }
};

/// Contiguous grouped GEMM: A's rows are sorted by group, group g owning the aligned segment
/// [offsets[g], offsets[g+1]) of which the first counts[g] rows are valid. The used rows
/// (offsets[G], capped by the allocated rows) are read on the device; a unit's group is found by
/// warp search over the offsets (last_group_at_or_before).
///
/// Units: a unit is kCluster vertically adjacent tiles (CTA rank r of a cluster takes the r-th,
/// kCluster * BLOCK_M ≤ 128, so a unit never leaves its 128-aligned segment). Every 128-row block
/// of a segment holds at least one valid row, so the first unit of each block always has work,
/// while the later ones (BLOCK_M * kCluster = 64: rows 64..127 of the block) are empty whenever a
/// group has ≤ 64 rows there — the common case at decode sizes. Two orders (GroupedLayoutParams::
/// sched_one_pass):
///  * passes (decode): pass 0 = the first unit of every 128-row block (never empty), pass 1 = the
///    second, ... With the CTAs striding through one flat order, half-empty layouts would otherwise
///    hand all the work to half of the CTAs (measured: stride 132, raster 8 → every odd CTA idle).
///    Inside a pass the order is rasterized as in the dense scheduler. Skipping an empty unit costs
///    a group search (dependent loads; ~0.7 µs as a binary search), so before entering pass 1
///    the scheduler reads all counts once: when no group has more than one unit's rows, passes ≥ 1 hold no work and
///    are dropped (measured at T = 64 without this: 20 / 43 µs of skipping at the end of GEMM1 /
///    GEMM2).
///  * one pass (prefill): units in M order, rasterized (the M unit fastest inside a raster group),
///    so all units that share a B tile are adjacent in the order; the few empty units are skipped.
/// Units are taken statically (CTA c: c, c + G, ...) or, with GroupedLayoutParams::tile_counter,
/// dynamically: the first statically, every further one by atomicAdd (in clusters of two, rank 0
/// claims and hands each index to rank 1: PairClaims).
/// A unit is skipped only when its first tile has no valid row (or, with MoeGemm1Fields::
/// pair_tail_split, when it is the odd N block of a split tail block), decisions both CTAs of a
/// cluster make alike, so they walk the same units; a tile of the unit past the valid rows is
/// computed on padding rows of the same segment (valid_rows = 0) and its epilogue must tolerate that.
/// 256-row tiles (one pass): unit u is rows [256 u, 256 u + 256) of the layout (with clusters of
/// two, at two horizontally adjacent N blocks, CTA rank r taking the r-th: the pair shares A).
/// Segments are 128-aligned, so a unit meets at most two groups; when its first group's segment
/// ends after 128 rows, the unit yields two tiles of at most 128 valid rows (one wave each), the
/// second with the next group, handed out right after the first. With GroupedLayoutParams::tail_halves the
/// units of the last partial wave (TailHalves over the units and the CTAs) go out as their two
/// 128-row halves, each a tile of its own.
/// The scheduler warp runs it (warp collectives: the group search, the count maximum); dynamic
/// units are taken by one atomic per unit.
/// P: the family's parameters (GroupedLayoutParams, or MoeGemm1Params for the pair tail split).
template <int kBlockM, int kBlockN, int kCluster = 1, class P = GroupedLayoutParams>
struct ContiguousScheduler {
  static constexpr bool kWide = kBlockM > 128;  // 256-row tiles
  static constexpr bool kPairN = gemm_cluster_shares_a(kBlockM, kCluster);
  static constexpr u32 kUnitRows = kWide ? u32(kBlockM) : u32(kBlockM * kCluster);
  static constexpr u32 kUnitN = kPairN ? u32(kCluster) : 1u;  // N blocks per unit
  static_assert(128 % kUnitRows == 0 || (kUnitRows == 256 && (kCluster == 1 || kPairN)),
                "a cluster's tiles must stay inside one 128-row segment; 256-row tiles pair along N");
  static constexpr u32 kPasses = kWide ? 1 : 128 / kUnitRows;
  static constexpr u32 kNone = 0xffffffffu;
  const P& p;
  u32 num_blocks, num_n_units, units_per_pass, num_units, group, rank, stride, next_index;
  u32 started = 0, passes_checked = 0;  // flags (u32: bool members were kept in local memory)
  u32 used_rows = 0;
  TailHalves tail;  // kWide
  u32 pending_m0 = kNone, pending_n0 = 0;  // kWide: the second tile of a unit that meets two groups
  PairClaims claims;  // kCluster == 2 with a tile counter

  /// One thread per CTA, before the cluster's first barrier (claims_smem: see PairClaims).
  __device__ __forceinline__ static void init_shared(u32 claims_smem) {
    if constexpr (kCluster == 2) PairClaims{claims_smem}.init();
  }

  __device__ __forceinline__ explicit ContiguousScheduler(const P& params, u32 claims_smem = 0)
      : p(params), num_n_units(((params.n + kBlockN - 1) / kBlockN + kUnitN - 1) / kUnitN),
        group(params.raster_group ? params.raster_group : 1), rank(blockIdx.x % kCluster),
        stride(gridDim.x / kCluster), next_index(blockIdx.x / kCluster) {
    claims.base = claims_smem;
    const u32 used = u32(ptx::ld_chain(p.group_offsets + p.num_groups));
    num_blocks = ((used < p.m ? used : p.m) + (kWide ? 255 : 127)) / (kWide ? 256 : 128);
    used_rows = used < p.m ? used : p.m;
    units_per_pass = num_blocks * num_n_units;
    num_units = units_per_pass * kPasses;
    tail = TailHalves(num_units, stride, kWide && p.tail_halves != 0);
  }

  /// Largest group count (the scheduler warp: each lane reads every 32nd count, four loads in flight).
  __device__ __forceinline__ int max_count() const {
    int m0 = 0, m1 = 0, m2 = 0, m3 = 0;
    u32 g = ptx::lane_id();
    for (; g + 96 < p.num_groups; g += 128) {
      m0 = max(m0, ptx::ld_chain(p.group_counts + g));
      m1 = max(m1, ptx::ld_chain(p.group_counts + g + 32));
      m2 = max(m2, ptx::ld_chain(p.group_counts + g + 64));
      m3 = max(m3, ptx::ld_chain(p.group_counts + g + 96));
    }
    for (; g < p.num_groups; g += 32) m0 = max(m0, ptx::ld_chain(p.group_counts + g));
    return __reduce_max_sync(0xffffffffu, max(max(m0, m1), max(m2, m3)));
  }

  /// Last group g < num_groups with offsets[g] <= row (0 if none), searched by the scheduler warp:
  /// each round every lane reads one of 32 evenly spaced candidates and a ballot keeps the span
  /// after the last one at or before `row` (offsets never decrease), so 256 groups take two rounds
  /// of dependent loads where a one-thread binary search took eight (~3 µs before a GEMM's first
  /// tile at decode sizes, docs/performance.md §Tile pipe and scheduler warp).
  __device__ __forceinline__ u32 last_group_at_or_before(u32 row) const {
    const u32 lane = ptx::lane_id();
    u32 lo = 0, n = p.num_groups;  // the answer lies in [lo, lo + n)
    while (n > 1) {
      const u32 step = (n + 31) / 32;
      const u32 g = lo + lane * step;
      const bool before = g < lo + n && u32(ptx::ld_chain(p.group_offsets + g)) <= row;
      const u32 last = 31 - __clz(__ballot_sync(0xffffffffu, before) | 1u);
      const u32 first = lo + last * step;
      n = min(step, lo + n - first);
      lo = first;
    }
    return lo;
  }

  /// This CTA's next unit index: its first statically, then by stride or from the shared counter
  /// (one atomic by lane 0, broadcast to the warp).
  __device__ __forceinline__ u32 take() {
    if (!started) {
      started = 1;
      return next_index;
    }
    if (p.tile_counter != nullptr) {
      static_assert(kCluster <= 2, "dynamic units for clusters of one or two");
      u32 claimed = 0;
      if (ptx::lane_id() == 0) {
        if (kCluster == 1 || rank == 0) {
          claimed = atomicAdd(p.tile_counter, 1u);
          if (kCluster == 2) claims.send(claimed);
        } else {
          claimed = claims.receive();
        }
      }
      return __shfl_sync(0xffffffffu, claimed, 0) + stride;
    }
    next_index += stride;
    return next_index;
  }

  /// kWide: the tile of rows [m0, min(end, its segment's end)) at column n0 (false if it holds no
  /// valid row) and its segment's end.
  __device__ __forceinline__ bool wide_tile(u32 m0, u32 n0, u32 end, Tile& t, u32& seg_end) {
    const u32 lo = last_group_at_or_before(m0);
    const int seg_start = ptx::ld_chain(p.group_offsets + lo);
    seg_end = u32(ptx::ld_chain(p.group_offsets + lo + 1));
    int count = ptx::ld_chain(p.group_counts + lo);
    if (count > int(seg_end) - seg_start) count = int(seg_end) - seg_start;
    const int valid = seg_start + count - int(m0);
    if (valid <= 0) return false;
    const u32 limit = (seg_end < end ? seg_end : end) - m0;
    t.m0 = m0;
    t.n0 = n0;
    t.valid_rows = u32(valid) < limit ? u32(valid) : limit;
    set_group(t, p, lo);
    return true;
  }

  __device__ __forceinline__ bool next_wide(Tile& t) {
    for (;;) {
      u32 seg_end;
      if (pending_m0 != kNone) {
        const u32 m0 = pending_m0;
        pending_m0 = kNone;
        if (wide_tile(m0, pending_n0, (m0 & ~255u) + 256u, t, seg_end)) return true;
      }
      const u32 unit = take();
      if (unit >= tail.units) return false;
      u32 part = 0;
      const u32 idx = tail.tile_of(unit, part);
      u32 m_unit, n_unit;
      raster(idx, num_blocks, num_n_units, group, m_unit, n_unit);
      const u32 unit_m0 = m_unit * 256u;
      const u32 n0 = (n_unit * kUnitN + rank) * kBlockN;
      if (part != 0) {  // a half: rows [m0, m0 + 128) alone
        const u32 m0 = unit_m0 + (part == 2 ? 128u : 0u);
        if (m0 < used_rows && wide_tile(m0, n0, m0 + 128u, t, seg_end)) return true;
        continue;
      }
      if (unit_m0 >= used_rows) continue;
      const bool has = wide_tile(unit_m0, n0, unit_m0 + 256u, t, seg_end);
      if (seg_end < unit_m0 + 256u && seg_end < used_rows) {  // a second group starts at + 128
        pending_m0 = seg_end;
        pending_n0 = n0;
      }
      if (has) return true;
    }
  }

  __device__ __forceinline__ bool next(Tile& t) {
    if constexpr (kWide) return next_wide(t);
    else return next_narrow(t);
  }

  __device__ __forceinline__ bool next_narrow(Tile& t) {
    for (;;) {
      const u32 idx = take();
      if (idx >= num_units) return false;
      u32 m_unit, n_block;  // m_unit: the unit's first row / kUnitRows
      if (p.sched_one_pass || kPasses == 1) {
        raster(idx, num_blocks * kPasses, num_n_units, group, m_unit, n_block);
      } else {
        const u32 pass = idx / units_per_pass;
        if (pass > 0 && !passes_checked) {
          passes_checked = 1;
          if (max_count() <= int(kUnitRows)) {  // no group reaches a second unit of its blocks
            num_units = units_per_pass;
            return false;
          }
        }
        u32 block;
        raster(idx - pass * units_per_pass, num_blocks, num_n_units, group, block, n_block);
        m_unit = block * kPasses + pass;
      }
      const u32 unit_m0 = m_unit * kUnitRows;
      if (unit_m0 >= p.m) continue;
      t.m0 = unit_m0 + rank * kBlockM;
      t.n0 = n_block * kBlockN;
      t.solo = 0;
      // Last group whose segment starts at or before the unit (empty groups share their start).
      const u32 lo = last_group_at_or_before(unit_m0);
      const int seg_start = ptx::ld_chain(p.group_offsets + lo);
      const int seg_end = ptx::ld_chain(p.group_offsets + lo + 1);
      int count = ptx::ld_chain(p.group_counts + lo);
      if (count > seg_end - seg_start) count = seg_end - seg_start;
      const int unit_valid = seg_start + count - int(unit_m0);
      if (unit_valid <= 0) continue;
      if constexpr (kCluster == 2 && !kPairN) {
        // A unit with at most one tile of valid rows: N blocks (2j, 2j + 1) of those rows, one per
        // rank, at unit (block, 2j); the unit at 2j + 1 is empty. (An odd last N block keeps the
        // ghost-tile form.) Both ranks take the same units, so they stay in step.
        if (p.pair_tail_split && unit_valid <= kBlockM) {
          if (n_block % 2u) continue;
          if (n_block + 1u < num_n_units) {
            t.m0 = unit_m0;
            t.n0 = (n_block + rank) * kBlockN;
            t.solo = 1;
          }
        }
      }
      const int valid = seg_start + count - int(t.m0);
      t.valid_rows = valid <= 0 ? 0u : (valid < kBlockM ? u32(valid) : u32(kBlockM));
      set_group(t, p, lo);
      return true;
    }
  }
};

/// Masked grouped GEMM: group g owns rows [g*max_m, (g+1)*max_m) of A and D, of which the first
/// min(counts[g], max_m) are valid. Tiles are numbered (group, n block, m tile) with the M tile
/// fastest; tiles past a group's count are skipped, so empty groups cost one read each.
/// With 128-row tiles and GroupedLayoutParams::tail_halves, the last partial wave of the tile numbering
/// (valid or not: the counts are not read ahead) is handed out in halves (TailHalves: 64 rows of a
/// 128-row tile, 128 of a 256-row one).
/// 256-row tiles in clusters of two pair along N (gemm_cluster_shares_a): a unit is two adjacent N
/// blocks of the same rows, CTA rank r taking the r-th (past N: a ghost tile that only loads its
/// share of A); both ranks read the same count, so they skip the same units.
template <int kBlockM, int kBlockN, int kCluster = 1>
struct MaskedScheduler {
  static_assert(kCluster == 1 || gemm_cluster_shares_a(kBlockM, kCluster), "masked pairs share A (256-row tiles)");
  const GroupedLayoutParams& p;
  u32 m_tiles_per_group, num_n_units, num_tiles, rank, stride, next_index;
  TailHalves tail;

  __device__ __forceinline__ static void init_shared(u32) {}

  __device__ __forceinline__ explicit MaskedScheduler(const GroupedLayoutParams& params, u32 = 0)
      : p(params),
        m_tiles_per_group((params.group_max_m + kBlockM - 1) / kBlockM),
        num_n_units(((params.n + kBlockN - 1) / kBlockN + kCluster - 1) / kCluster),
        num_tiles(params.num_groups * m_tiles_per_group * num_n_units),
        rank(blockIdx.x % kCluster),
        stride(gridDim.x / kCluster),
        next_index(blockIdx.x / kCluster),
        tail(num_tiles, stride, kBlockM >= 128 && params.tail_halves != 0) {}

  __device__ __forceinline__ bool next(Tile& t) {
    while (next_index < tail.units) {
      u32 part = 0;
      const u32 idx = tail.tile_of(next_index, part);
      next_index += stride;
      const u32 per_group = m_tiles_per_group * num_n_units;
      const u32 g = idx / per_group;
      const u32 r = idx - g * per_group;
      const u32 m_tile = r % m_tiles_per_group;
      int count = ptx::ld_chain(p.group_counts + g);
      if (count > int(p.group_max_m)) count = int(p.group_max_m);
      u32 offset;
      const int valid = tile_part_rows<kBlockM / 2>(part, count - int(m_tile * kBlockM), offset);
      if (valid <= 0) continue;
      t.m0 = g * p.group_max_m + m_tile * kBlockM + offset;
      t.n0 = ((r / m_tiles_per_group) * kCluster + rank) * kBlockN;
      t.valid_rows = valid < kBlockM ? u32(valid) : u32(kBlockM);
      set_group(t, p, g);
      return true;
    }
    return false;
  }
};

}  // namespace moekit::sm90
