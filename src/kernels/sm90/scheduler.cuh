// Persistent tile schedulers for the sm90 GEMM family.
//
// A scheduler hands each CTA its output tiles in order: next(tile) returns false once the CTA has
// no more. All threads of a CTA run their own copy and see the same sequence. Grouped (MoE)
// schedulers plug in here with the same interface; the mainloop never changes.
#pragma once
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "ptx/ptx.cuh"

namespace moekit::sm90 {

using ptx::u32;

/// One output tile: where A, B and D start, and the offset of its group's B scales.
struct Tile {
  u32 m0;         ///< first row of A and D
  u32 n0;         ///< first column of D
  u32 b_row0;     ///< first row of B in the (stacked) B tensor
  u32 sb_offset;  ///< offset of this group's B scales in GemmParams::sb
};

/// Dense GEMM: tiles of an M x N output, visited in groups of `raster_group` M blocks; within a
/// group the M block changes fastest, so concurrently running CTAs share B tiles and a few A tiles
/// in L2.
/// With clusters of kCluster CTAs (TMA multicast of B), the unit of work is kCluster vertically
/// adjacent tiles with the same N block; CTA rank r of a cluster takes the r-th. Both CTAs of a
/// cluster therefore walk the same number of units; a unit hanging past M computes a ghost tile
/// whose loads are zero-filled and whose stores TMA clips away.
template <int kBlockM, int kBlockN, int kCluster = 1>
struct DenseScheduler {
  u32 num_units_m, num_n_blocks, num_units, group, rank, stride;
  u32 next_index;

  __device__ __forceinline__ explicit DenseScheduler(const GemmParams& p)
      : num_units_m(((p.m + kBlockM - 1) / kBlockM + kCluster - 1) / kCluster),
        num_n_blocks((p.n + kBlockN - 1) / kBlockN),
        num_units(num_units_m * num_n_blocks),
        group(p.raster_group >= kCluster ? p.raster_group / kCluster : 1),
        rank(blockIdx.x % kCluster),
        stride(gridDim.x / kCluster),
        next_index(blockIdx.x / kCluster) {}

  __device__ __forceinline__ bool next(Tile& t) {
    if (next_index >= num_units) return false;
    const u32 idx = next_index;
    next_index += stride;
    const u32 units_per_group = group * num_n_blocks;
    const u32 g = idx / units_per_group;
    const u32 first_m = g * group;
    const u32 rows_in_group = (num_units_m - first_m) < group ? (num_units_m - first_m) : group;
    const u32 r = idx - g * units_per_group;
    const u32 m_block = (first_m + r % rows_in_group) * kCluster + rank;
    const u32 n_block = r / rows_in_group;
    t.m0 = m_block * kBlockM;
    t.n0 = n_block * kBlockN;
    t.b_row0 = t.n0;
    t.sb_offset = 0;
    return true;
  }
};

}  // namespace moekit::sm90
