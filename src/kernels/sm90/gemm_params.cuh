// Run-time parameters of the sm90 FP8 GEMM kernels (passed by value; the same layout on host and
// device). Every family's struct extends GemmParams, the part the mainloop, the loaders and the
// math warpgroups read; the schedulers and epilogues read their family's fields. Plain C++ with no
// CUDA dependencies: the host launchers fill these structs (gemm/gemm_launch.h).
#pragma once

namespace moekit::sm90 {

/// What every family's mainloop reads.
struct GemmParams {
  unsigned m;             ///< rows of A / D
  unsigned n;             ///< columns of D (rows of B per group)
  unsigned k;             ///< reduction size
  unsigned num_kb;        ///< ceil(k / 128)
  unsigned num_n_sb;      ///< ceil(n / 128): B-scale blocks per group along N
  const float* sb;        ///< B scales [groups][num_n_sb][num_kb]
  unsigned raster_group;  ///< M blocks per rasterization group (L2 reuse)
  /// B's global layout: 0 = row-major rows of k bytes (the TMA map's rows are B's rows); R > 0 =
  /// K-block tiled: rows [R c, R c + R) x K block kb form one contiguous chunk of R x 128 bytes,
  /// chunk (c, kb) at ((c * num_kb) + kb) * R * 128 (the TMA map's rows are 128-byte chunk rows).
  /// A stage's B tile (R = BLOCK_N) is then one sequential read instead of BLOCK_N 128-byte pieces
  /// of rows k bytes apart.
  unsigned b_chunk_rows;
  /// Rows per A TMA box: 0 = BLOCK_M (one box per stage); 8 (decode) = only the boxes that hold a
  /// tile's valid rows are loaded, so the padding rows of short groups cost no DRAM / L2 traffic
  /// (their smem rows keep stale bytes; padding rows' results are never stored or used).
  unsigned a_box_rows;
  /// PDL (programmatic dependent launch), 0 or 1: when 1 the schedulers read the group layout
  /// (and find their first tile), and the gather variant its first tile's row map, *before*
  /// waiting for the previous kernel. Only for a group layout and row map written at least two
  /// launches back by a kernel chain in which every kernel triggers its
  /// dependents only after its own wait (the MoE layer's chain: moe_sort → permute → GEMM1 → GEMM2).
  /// Prefetching the first tile's weights into L2 there as well was measured and gave nothing.
  unsigned pdl_early;
  /// With pdl (and pdl_early, so the first tile is known before the wait): 1 = the load warp
  /// issues the first tile's B loads (weights, which no previous kernel writes) for every stage
  /// before waiting, and the A loads after it. Always equal to pdl_early, yet a field of its own:
  /// reading pdl_early there instead changes the kernels' code (register allocation and schedule).
  unsigned b_before_wait;
  /// 1 when launched with programmatic dependent launch (the griddepcontrol instructions are only
  /// executed then).
  unsigned pdl;
  /// 1 = B (single-CTA loads) with an L2 evict-first policy: set where each B tile is read by at
  /// most two M blocks of its group, so B streams through L2 once without pushing out A and D
  /// (docs/performance.md §B evict-first: masked 4 x 256 (7168, 2048) 37.8 -> 35.3 us kernel-only), except for the
  /// plain contiguous body (Fp8GemmFamily::b_evict_first); else the default priority.
  unsigned b_evict_first;
  /// Diagnostics (null in production, zeroed by the host): per CTA, kGemmTraceSlots values written
  /// by the first math thread — timestamps (ns) of entry, first tile scheduled, first stage ready,
  /// last tile's K loop done, last tile's epilogue issued, exit; then the K loop end of each of the
  /// first kGemmTraceTiles tiles, the SM id, the number of tiles and two cycle counts (kGemmTraceSlot*).
  unsigned long long* trace;
};

/// Bytes of every family's parameter struct: its fields, then reserved bytes. The kernels' code
/// depends on the size of their parameter block: the same kernels with a 96-byte block instead of
/// the 216 bytes of the one struct all families shared before compiled to different SASS
/// (register allocation and schedule), so each struct keeps that size until an A/B on the GPU says
/// the smaller blocks run as fast.
inline constexpr unsigned long long kGemmParamsBytes = 216;

/// A family's fields padded to kGemmParamsBytes.
template <class Fields>
struct PaddedGemmParams : Fields {
  static_assert(sizeof(Fields) % 8 == 0 && sizeof(Fields) < kGemmParamsBytes, "fields fit the parameter block");
  unsigned long long reserved[(kGemmParamsBytes - sizeof(Fields)) / 8];
};

/// The dense GEMM (DenseScheduler, bf16 epilogue).
struct DenseGemmFields : GemmParams {
  /// Clusters of one without split-K, 128- or 256-row tiles: 1 = when the schedule's last wave holds
  /// at most half as many tiles as there are CTAs, each of those is handed out as two halves to two
  /// CTAs (64 rows: one math warpgroup's MMAs; 128 rows: one wave), so the last wave ends sooner.
  unsigned tail_halves;
  void* d;                ///< D base, for the row-masked store of partial tiles
  unsigned ldd;           ///< D row stride in elements
};
using DenseGemmParams = PaddedGemmParams<DenseGemmFields>;

/// A grouped layout and its schedule (ContiguousScheduler, MaskedScheduler).
struct GroupedLayoutParams : GemmParams {
  /// Dynamic tile scheduling (contiguous scheduler, clusters of 1 or 2): null = static (CTA c takes
  /// units c, c + G, c + 2G, ... of the rasterized order); else a device counter that is 0 when the
  /// kernel starts (the caller zeroes it; nothing resets it): each CTA (cluster) takes its first
  /// unit statically and every further one with atomicAdd(tile_counter, 1) + G (in a cluster of two,
  /// rank 0 claims and hands the index to rank 1: PairClaims), so units are started in
  /// order as CTAs free up and the CTAs that share a B tile (consecutive units) run it at the same
  /// time however far the CTAs have drifted apart — the condition for L2 to serve the B tile's
  /// re-reads (docs/performance.md §Dynamic tile scheduling).
  unsigned* tile_counter;
  /// Contiguous scheduler: 0 = units in passes (first unit of every 128-row block first: decode);
  /// 1 = one pass over all units, the M unit fastest inside a raster group (prefill: every B tile
  /// is shared by all the units of its expert, which must run together).
  unsigned sched_one_pass;
  /// Masked scheduler with 128- or 256-row tiles, and the contiguous one with 256-row tiles: the
  /// last wave's tiles (units) in halves, as DenseGemmParams::tail_halves (masked 448-tile cases
  /// −2…−4%, docs/performance.md §Tail halves).
  unsigned tail_halves;
  const int* group_offsets;  ///< contiguous: [num_groups + 1] aligned segment starts
  const int* group_counts;   ///< [num_groups] valid rows per group
  unsigned num_groups;
  unsigned group_max_m;      ///< masked: rows per group in A and D
};

/// The grouped GEMMs with bf16 output (contiguous, masked).
struct GroupedGemmFields : GroupedLayoutParams {
  void* d;                   ///< D base, for the row-masked store of partial tiles
  unsigned ldd;              ///< D row stride in elements
};
using GroupedGemmParams = PaddedGemmParams<GroupedGemmFields>;

/// The MoE layer's GEMM1 (SwiGLU + FP8 requantization epilogue, kernels/sm90/epilogue_moe.cuh).
struct MoeGemm1Fields : GroupedLayoutParams {
  /// Contiguous scheduler with 64-row tiles in B-multicast pairs (clusters of two along M): 1 = a
  /// unit whose 128 rows hold at most 64 valid ones (an expert's short last block, where rank 1
  /// would compute a ghost tile of padding) runs as two N blocks of those rows instead — each CTA
  /// one of them, loading its own B (no multicast: Tile::solo) — and the unit of the odd N block
  /// is skipped, so such a block costs half the pair-tiles (docs/performance.md §Pair tail split).
  unsigned pair_tail_split;
  float limit;               ///< SwiGLU clamp when > 0
  float* sa_out;             ///< scales of the FP8 output, physical A-scale layout
  unsigned sa_out_ld;        ///< sfa_ld(rows) of sa_out
  /// The gather variant: expanded index (t * top_k + j) of each row, < 0 for padding.
  const int* row_map;
  unsigned top_k;
  // Gathered A: row r of a tile is token row_map[m0 + r] / top_k of a_gather, each token quantized
  // once. The FP8 bodies copy the rows with cp.async (fp8_gemm_loaders.cuh GatherALoader; the A TMA
  // map is unused); the MXFP4 decode GEMM1 (MxDecodeTraits::kGatherA) loads them through the A map
  // (over a_gather, one-row boxes) and copies the scales from sa_gather. The MXFP4 decode body in
  // stream-K pieces never gathers: then (scheduler_stream_k.cuh StreamKPartials) the same bytes hold
  // its per-CTA slots of partial sums (gemm_stream_k_slot_floats each) and flags, zero at launch
  // (the parameter block has no room for more fields: kGemmParamsBytes).
  union {
    const unsigned char* a_gather;  ///< FP8 [tokens, k], rows a_gather_ld bytes apart
    float* sk_partials;
  };
  unsigned a_gather_ld;
  union {
    const float* sa_gather;  ///< its scales, physical A-scale layout: [kb * sa_gather_ld + token]
    unsigned* sk_flags;
  };
  unsigned sa_gather_ld;
  /// gpt-oss's layer (SPEC §6): FP32 biases [experts, 2I] (gate then up; null: none) added to g and
  /// u before the clamp, I = b1_inter; gpt_oss = 1: h = g·sigmoid(alpha·g)·(u + 1) instead of silu(g)·u.
  const float* b1;
  unsigned b1_inter;
  unsigned gpt_oss;
  float alpha;
};
using MoeGemm1Params = PaddedGemmParams<MoeGemm1Fields>;

/// The MoE layer's GEMM2 (scatter-add epilogue, kernels/sm90/epilogue_moe.cuh).
struct MoeGemm2Fields : GroupedLayoutParams {
  const int* row_map;        ///< expanded index (t * top_k + j) of each row, < 0 for padding
  const float* row_weight;   ///< router weight of each expanded index
  float* out_acc;            ///< FP32 [tokens, n] output that rows are scatter-added into
  unsigned top_k;
  const float* b2;           ///< FP32 biases [experts, n] added before the router weight, or null
};
using MoeGemm2Params = PaddedGemmParams<MoeGemm2Fields>;

}  // namespace moekit::sm90
