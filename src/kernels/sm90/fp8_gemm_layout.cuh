// Shared-memory layout and tile rules of the sm90 FP8 block-scaled GEMM family.
//
// Plain constexpr C++ with no CUDA dependencies: the host runtime (config selection, launch) and
// the device kernel (compiled by NVRTC) both include this file, so the two can never disagree on
// how many bytes a configuration needs.
//
// Dynamic shared memory, in order (base rounded up to 1024 bytes inside the allocation):
//   D staging tile      BLOCK_M x BLOCK_N bf16, as BLOCK_N/atom_cols swizzle atoms (none with the
//                       direct-store epilogue, GemmConfig::direct_store); with split-K
//                       (> 1) at least BLOCK_M x BLOCK_N FP32: the same bytes hold the partial sums
//                       on the CTAs that hand theirs over (cluster ranks > 0, which store nothing)
//   A stages            STAGES x BLOCK_M x 128 FP8 (128-byte swizzle)
//   B stages            STAGES x BLOCK_N x 128 FP8 (128-byte swizzle)
//   A-scale stages      STAGES x (BLOCK_M + 4) FP32
//   full / empty        STAGES + STAGES mbarriers
//   tile pipe           kGemmTileSlots tile records (32 B) + their full / empty mbarriers
//   split-K barriers    partials-full and partials-free mbarriers (used with split-K > 1 only)
//   staged B scales     256-row tiles: per tile slot, the tile's B-scale rows (gemm_sb_stage_floats), copied
//                       from global memory by the scheduler warp when it publishes the tile
//                       (K <= kGemmMaxStagedKb blocks; the math threads read longer rows from global
//                       memory through L1)
#pragma once
#include "kernels/sm90/gemm_params.cuh"

/// Diagnostic switch for A/B runs only — the results are wrong: MOEKIT_DIAG_NO_EPILOGUE=1 makes the
/// bf16 and MoE GEMM1 epilogues store nothing (the sums only feed a never-taken store, so the K loop
/// stays), to measure what the epilogue costs (docs/performance.md §Energy and the power limit).
#ifndef MOEKIT_DIAG_NO_EPILOGUE
#define MOEKIT_DIAG_NO_EPILOGUE 0
#endif

namespace moekit::sm90 {

inline constexpr unsigned kGemmBlockK = 128;

#if MOEKIT_DIAG_NO_EPILOGUE
/// MOEKIT_DIAG_NO_EPILOGUE: folds the tile's sums into one never-taken store.
template <int N>
__device__ __forceinline__ void diag_sink(const float (&acc)[N], float* never) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += acc[i];
  if (s == 1.2345e-30f && never != nullptr) *never = s;
}
#endif

/// True if the kernel supports this BLOCK_N: a multiple of 8 in [16, 128], or 144, 160 or 192
/// (wider tiles must never span more than two 128-column scale blocks).
constexpr bool gemm_block_n_supported(int bn) {
  if (bn % 8 != 0 || bn < 16) return false;
  return bn <= 128 || bn == 144 || bn == 160 || bn == 192;
}

constexpr int gemm_gcd(int a, int b) { return b == 0 ? a : gemm_gcd(b, a % b); }

/// 8-column chunks, of a warpgroup's `wg_cols` columns starting at column `n_wg`, that lie in the
/// first of the (at most two) B-scale blocks of `sb_rows` rows they touch; the rest use the next.
/// With n_wg a multiple of wg_cols (tiles start at multiples of BLOCK_N) this is a multiple of
/// gcd(sb_rows, wg_cols) / 8, so chunks in groups of that size share a scale (Fp8GemmTraits::kSbChunkGroup).
constexpr unsigned gemm_sb_first_block_chunks(unsigned n_wg, unsigned wg_cols, unsigned sb_rows) {
  return (sb_rows - n_wg % sb_rows < wg_cols ? sb_rows - n_wg % sb_rows : wg_cols) / 8u;
}

constexpr bool gemm_block_m_supported(int bm) { return bm == 64 || bm == 128 || bm == 256; }

/// Row waves of a tile: a 256-row tile is two waves of 128 rows, each run by the same two math
/// warpgroups (64 rows each) one after the other with one accumulator set (the FP32 sums of both
/// waves stay in registers); smaller tiles are one wave.
constexpr int gemm_waves(int bm) { return bm > 128 ? bm / 128 : 1; }
/// Rows of one wave (the rows the math warpgroups cover at once).
constexpr int gemm_wave_rows(int bm) { return bm / gemm_waves(bm); }
/// What a 2-CTA cluster shares (GemmConfig::multicast = 2): 256-row tiles pair along N and share A
/// (each CTA loads one of the two 128-row A boxes for both: A is 2/3 of such a stage's bytes);
/// smaller tiles pair along M and share B (each CTA loads half of the B tile for both).
constexpr bool gemm_cluster_shares_a(int bm, int cluster) { return bm > 128 && cluster > 1; }
/// Rows of B each CTA loads per stage (the TMA box height of B).
constexpr int gemm_b_box_rows(int bm, int bn, int cluster) {
  return gemm_cluster_shares_a(bm, cluster) ? bn : bn / cluster;
}

/// Bytes of one 128-B/64-B/32-B swizzle row of the bf16 D staging tile for this BLOCK_N, or 0
/// (no swizzle: rows of BLOCK_N * 2 bytes) when BLOCK_N is an odd multiple of 8.
constexpr unsigned gemm_d_swizzle_bytes(int bn) {
  return (bn * 2) % 128 == 0 ? 128u : ((bn * 2) % 64 == 0 ? 64u : ((bn * 2) % 32 == 0 ? 32u : 0u));
}

/// Columns per TMA store box of the D staging tile (one swizzle atom, or the whole row).
constexpr unsigned gemm_d_box_cols(int bn) {
  return gemm_d_swizzle_bytes(bn) ? gemm_d_swizzle_bytes(bn) / 2 : unsigned(bn);
}

constexpr unsigned gemm_smem_d_bytes(int bm, int bn) { return unsigned(bm) * unsigned(bn) * 2u; }
constexpr unsigned gemm_smem_a_bytes(int bm) { return unsigned(bm) * kGemmBlockK; }
constexpr unsigned gemm_smem_b_bytes(int bn) { return unsigned(bn) * kGemmBlockK; }
/// A-scale stage: per wave a box of (wave rows + 4) floats, loaded from the 16-byte aligned row
/// (m0 + 128 w) & ~3 (grouped tiles may start at any row; TMA boxes must start 16-byte aligned),
/// read at offset m0 & 3. (A box holds at most 256 elements, hence one box per wave.)
constexpr unsigned kGemmSfaSlack = 4;
constexpr unsigned gemm_sfa_box(int bm) { return unsigned(gemm_wave_rows(bm)) + kGemmSfaSlack; }
/// Floats between the A-scale boxes of consecutive waves in a stage (128-byte aligned TMA
/// destinations).
constexpr unsigned gemm_sfa_wave_floats(int bm) { return (gemm_sfa_box(bm) * 4u + 127u) / 128u * 32u; }
/// Shared memory per A-scale stage: one box per wave, each 128-byte aligned.
constexpr unsigned gemm_smem_sfa_bytes(int bm) { return unsigned(gemm_waves(bm)) * gemm_sfa_wave_floats(bm) * 4u; }
/// Shared memory of one pipeline stage.
constexpr unsigned gemm_stage_bytes(int bm, int bn) {
  return gemm_smem_a_bytes(bm) + gemm_smem_b_bytes(bn) + gemm_smem_sfa_bytes(bm);
}
/// Bytes the TMA delivers per stage (the mbarrier transaction count).
constexpr unsigned gemm_stage_tx_bytes(int bm, int bn) {
  return gemm_smem_a_bytes(bm) + gemm_smem_b_bytes(bn) + unsigned(gemm_waves(bm)) * gemm_sfa_box(bm) * 4u;
}
/// Tiles the scheduler thread may publish ahead of the math warpgroups (the tile pipe,
/// fp8_gemm_loaders.cuh): with dynamic scheduling also how far ahead a CTA takes units.
inline constexpr unsigned kGemmTileSlots = 3;
/// Arrivals that publish a tile: every lane of the scheduler warp.
inline constexpr unsigned kGemmTilePublishers = 32;
/// Bytes of one tile record in the pipe (Tile, padded).
inline constexpr unsigned kGemmTileRecordBytes = 32;
/// Shared memory of the tile pipe: the records, then a full and an empty mbarrier per slot.
/// Offset, inside the tile pipe's region, of the pair-claims ring (scheduler.cuh PairClaims: four
/// full and four empty mbarriers, four 4-byte values), and its bytes.
constexpr unsigned gemm_pair_claims_offset() { return kGemmTileSlots * (kGemmTileRecordBytes + 16u); }
inline constexpr unsigned kGemmPairClaimsBytes = 96;
constexpr unsigned gemm_tile_pipe_bytes() { return gemm_pair_claims_offset() + kGemmPairClaimsBytes; }
/// Longest B-scale row (K blocks) staged in shared memory per tile (K <= 16384).
inline constexpr unsigned kGemmMaxStagedKb = 128;
/// B-scale rows a tile of BLOCK_N columns may touch: one when every tile lies inside one 128-row
/// scale block, else two (a tile never spans more, gemm_block_n_supported).
constexpr unsigned gemm_sb_stage_rows(int bn) { return (bn <= 128 && 128 % bn == 0) ? 1u : 2u; }
/// Floats of one tile slot's staged B scales: 256-row tiles only (Fp8GemmTraits::kStageSb).
constexpr unsigned gemm_sb_stage_floats(int bm, int bn) {
  return bm == 256 ? gemm_sb_stage_rows(bn) * kGemmMaxStagedKb : 0u;
}
/// Offset of the staged B scales after the start of the tile pipe (past the split-K barriers).
constexpr unsigned gemm_sb_stage_offset() { return gemm_tile_pipe_bytes() + 16u; }
/// Most CTAs that share one tile's K range (split-K, a thread-block cluster along K).
inline constexpr int kGemmMaxSplitK = 8;
/// Shared memory of the split-K partial sums (the FP32 tile; a multiple of 1024 bytes); 0 without
/// split-K. They share their bytes with the epilogue's staging buffer (see above).
constexpr unsigned gemm_split_k_partials_bytes(int bm, int bn, int split_k) {
  return split_k > 1 ? unsigned(bm) * unsigned(bn) * 4u : 0u;
}
/// The staging buffer of `epilogue_bytes`, grown to hold the split-K partials.
constexpr unsigned gemm_staging_bytes(unsigned epilogue_bytes, int bm, int bn, int split_k) {
  return epilogue_bytes > gemm_split_k_partials_bytes(bm, bn, split_k) ? epilogue_bytes
                                                                       : gemm_split_k_partials_bytes(bm, bn, split_k);
}
/// MXFP4 B (docs/design.md §MXFP4 weights): the prepared weights hold, per 32 rows of B and K
/// block, a sub-chunk of kMxfp4SubBytes: the rows' packed codes (32 x 64 bytes of loader words,
/// mxfp4_expand.cuh) and then, per row and 32-block, the byte offset of its shift's expansion table
/// (32 x 4 bytes: 8 (shift − kMxfp4ZeroShift), mxfp4_table_offset). The kernel's TMA map reads them
/// as rows of kMxfp4TmaRowBytes.
inline constexpr unsigned kMxfp4SubRows = 32;
inline constexpr unsigned kMxfp4CodeBytes = kMxfp4SubRows * kGemmBlockK / 2;
inline constexpr unsigned kMxfp4SubBytes = kMxfp4CodeBytes + kMxfp4SubRows * 4;
inline constexpr unsigned kMxfp4TmaRowBytes = 64;
inline constexpr unsigned kMxfp4SubTmaRows = kMxfp4SubBytes / kMxfp4TmaRowBytes;  // 34
/// Expansion tables in shared memory: one 8-byte table per shift in [kMxfp4ZeroShift, 6], then zero
/// tables up to kMxfp4TableSlots, so any offset byte masked to a multiple of 8 (& 0xF8) reads a
/// table (a corrupt prepared byte expands to zeros or to a wrong shift, never past the tables).
inline constexpr unsigned kMxfp4Tables = 20;
inline constexpr unsigned kMxfp4TableSlots = 32;
/// One raw slot: a B tile's sub-chunks for one K block.
constexpr unsigned gemm_mx_raw_bytes(int bn) { return unsigned(bn) / kMxfp4SubRows * kMxfp4SubBytes; }

/// Dynamic shared memory up to the end of the staged B scales (offsets from the 1024-aligned base).
constexpr unsigned gemm_smem_core_bytes(unsigned epilogue_bytes, int bm, int bn, int stages, int split_k) {
  return gemm_staging_bytes(epilogue_bytes, bm, bn, split_k) + unsigned(stages) * gemm_stage_bytes(bm, bn) +
         unsigned(stages) * 16u + gemm_sb_stage_offset() + kGemmTileSlots * gemm_sb_stage_floats(bm, bn) * 4u;
}
/// With MXFP4 B (mx_stages raw slots, 0 = FP8 B): the raw slots from the next 1024-byte boundary
/// after the core, then the expansion tables (256 bytes) and a full and an empty mbarrier per slot.
constexpr unsigned gemm_mx_region_offset(unsigned core_bytes) { return (core_bytes + 1023u) / 1024u * 1024u; }
constexpr unsigned gemm_mx_region_bytes(int bn, int mx_stages) {
  return mx_stages ? unsigned(mx_stages) * gemm_mx_raw_bytes(bn) + 256u + unsigned(mx_stages) * 16u : 0u;
}

/// B rows whose codes one CTA loads and expands: the whole tile, or with B-sharing MXFP4 pairs
/// (a cluster of two along M, mxfp4_loader.cuh) its rank's half.
constexpr int gemm_mx_raw_rows(int bn, int cluster) { return bn / cluster; }

/// Total dynamic shared memory with an epilogue staging buffer of `epilogue_bytes` (the split-K
/// barriers and the staged B scales after the tile pipe; with MXFP4 B its raw slots after them,
/// of gemm_mx_raw_rows(bn, cluster) rows each).
constexpr unsigned gemm_smem_bytes_with(unsigned epilogue_bytes, int bm, int bn, int stages, int split_k = 1,
                                        int mx_stages = 0, int cluster = 1) {
  return 1024u /* alignment slack */ +
         (mx_stages ? gemm_mx_region_offset(gemm_smem_core_bytes(epilogue_bytes, bm, bn, stages, split_k)) +
                          gemm_mx_region_bytes(gemm_mx_raw_rows(bn, cluster), mx_stages)
                    : gemm_smem_core_bytes(epilogue_bytes, bm, bn, stages, split_k));
}
/// The MXFP4 decode GEMMs (mxfp4_decode_gemm.cuh): tiles of `tok` tokens (A rows, the MMA's N) x
/// `rows` weight rows; the core layout above with no B stages (A stages of `tok` rows), then the
/// raw region of `rows`-row slots. `k_groups` (1 or 2) pairs of math warpgroups share each tile's
/// K blocks, then the producer warpgroup.
constexpr int gemm_mx_decode_threads(int k_groups) { return 128 * (2 * k_groups + 1); }
constexpr bool gemm_mx_decode_supported(int tok, int rows) {
  return (tok == 8 || tok == 16 || tok == 32) && (rows == 128 || rows == 256);  // tiles divide 128-row segments
}
/// K groups a decode tile may split into: 2 only for 8-token tiles (the registers of four math
/// warpgroups hold one 8-token fragment set each, mxfp4_decode_gemm.cuh MxDecodeTraits).
constexpr bool gemm_mx_decode_k_groups_supported(int tok, int k_groups) {
  return k_groups == 1 || (k_groups == 2 && tok == 8);
}
/// Per tile slot, the tile's B-scale rows (rows / sb_rows of them, sb_rows rows of B per scale),
/// staged by the scheduler warp (TilePipe::push) after the tile pipe.
constexpr unsigned gemm_mx_decode_sb_floats(int rows, int sb_rows) { return unsigned(rows / sb_rows) * kGemmMaxStagedKb; }
/// With two K groups, the second group's partial sums for the first (256 math threads x rows / 128
/// MMA tiles x tok / 2 floats), in two buffers (tiles alternate), after the staged B scales.
constexpr unsigned gemm_mx_decode_xch_bytes(int tok, int rows, int k_groups) {
  return k_groups > 1 ? 2u * 256u * unsigned(rows / 128) * unsigned(tok / 2) * 4u : 0u;
}
constexpr unsigned gemm_mx_decode_core_bytes(unsigned epilogue_bytes, int tok, int rows, int sb_rows, int stages,
                                             int k_groups = 1) {
  return gemm_smem_core_bytes(epilogue_bytes, tok, 0, stages, 1) +
         kGemmTileSlots * gemm_mx_decode_sb_floats(rows, sb_rows) * 4u + gemm_mx_decode_xch_bytes(tok, rows, k_groups);
}
constexpr unsigned gemm_mx_decode_smem_bytes(unsigned epilogue_bytes, int tok, int rows, int sb_rows, int stages,
                                             int raw, int k_groups = 1) {
  return 1024u + gemm_mx_region_offset(gemm_mx_decode_core_bytes(epilogue_bytes, tok, rows, sb_rows, stages, k_groups)) +
         gemm_mx_region_bytes(rows, raw);
}
/// Stream-K GEMM1 decode (scheduler_stream_k.cuh): floats of one CTA's slot of partial sums — a
/// 256-row tile's sums for `tok` tokens over the two math warpgroups (tok / 2 per MMA tile and thread).
constexpr unsigned gemm_stream_k_slot_floats(int tok) { return 256u * unsigned(tok); }
/// CTAs a stream-K launch may use (the slots and flags a caller provides).
inline constexpr unsigned kStreamKMaxCtas = 256;
/// Groups the stream-K scheduler warp can count (32 lanes x 32 groups).
inline constexpr unsigned kStreamKMaxGroups = 1024;
/// The decode GEMM1 epilogue's staging: the FP8 h tile (tok rows of 128 bytes, 128-byte swizzled)
/// and the eight math warps' token maxima.
constexpr unsigned gemm_mx_decode_swiglu_smem(int tok) { return unsigned(tok) * 128u + 1024u; }

/// Staging bytes of the bf16 epilogue: the D tile (Bf16TmaEpilogue), or none when the tile is
/// stored straight from registers (Bf16DirectEpilogue, GemmConfig::direct_store).
constexpr unsigned gemm_bf16_staging_bytes(int bm, int bn, bool direct_store) {
  return direct_store ? 0u : gemm_smem_d_bytes(bm, bn);
}
/// Total dynamic shared memory of a configuration with the bf16 epilogue (independent of the shape).
constexpr unsigned gemm_smem_bytes(int bm, int bn, int stages, int split_k = 1, bool direct_store = false) {
  return gemm_smem_bytes_with(gemm_bf16_staging_bytes(bm, bn, direct_store), bm, bn, stages, split_k);
}

inline constexpr unsigned kGemmTraceTiles = 12;
inline constexpr unsigned kGemmTraceSlotTile0 = 6;  ///< K loop end of tile i at slot 6 + i
inline constexpr unsigned kGemmTraceSlotSm = kGemmTraceSlotTile0 + kGemmTraceTiles;
inline constexpr unsigned kGemmTraceSlotTiles = kGemmTraceSlotSm + 1;
/// The SM's cycle counter at the first stage and at the last K loop's end (the SM clock between them).
inline constexpr unsigned kGemmTraceSlotClock = kGemmTraceSlotTiles + 1;
inline constexpr unsigned kGemmTraceSlots = kGemmTraceSlotClock + 2;

/// Shared memory of the MoE GEMM1 epilogue for a 64-row tile: the FP8 tile of 128 h columns
/// (128-byte swizzled rows) and the two warpgroups' row maxima, rounded to 1024 bytes.
constexpr unsigned kSwigluEpilogueSmem = 64u * 128u + 1024u;

/// Threads per CTA: one math warpgroup per 64 rows of a wave (times `wg_n` warpgroups side by side
/// along N), plus one producer warpgroup, plus (MXFP4 B) one warpgroup that expands the weights.
constexpr int gemm_num_threads(int bm, int wg_n = 1, bool mx = false) {
  return (gemm_wave_rows(bm) / 64) * wg_n * 128 + 128 + (mx ? 128 : 0);
}

}  // namespace moekit::sm90
