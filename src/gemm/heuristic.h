// Configuration selection for the FP8 GEMM family — the one place that decides tile shapes,
// stage counts, rasterization and grid size. Pure host code, unit-tested on the CPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "moekit/gemm.h"

namespace moekit::detail {

/// What the heuristic needs to know about the device.
struct GemmDeviceLimits {
  int num_sms = 132;                  ///< H100 SXM / H200
  unsigned smem_bytes = 232448;       ///< opt-in dynamic shared memory per block (227 KiB)
  /// cluster_slots[s]: clusters of s CTAs (one per SM) that run at once; 0 = unknown (taken as
  /// num_sms / s).
  int cluster_slots[9] = {};
  /// CTAs a grid of clusters of `size` may have in one wave.
  int max_cluster_ctas(int size) const {
    if (size <= 1) return num_sms;
    const int fit = num_sms / size;
    const int slots = size >= 1 && size <= 8 && cluster_slots[size] > 0 ? cluster_slots[size] : fit;
    return (slots < fit ? slots : fit) * size;
  }
};

/// Most pipeline stages that fit in shared memory for this tile (capped), 0 if none.
int gemm_max_stages(int block_m, int block_n, const GemmDeviceLimits& lim);

/// Picks the configuration with the lowest modeled time (see heuristic.cpp for the model) for
/// `groups` independent problems of m x n x k each (1 for the dense GEMM; grouped GEMMs pass the
/// expected rows per group). `allow_split_k` (the dense GEMM): split-K candidates, and the model's
/// term for one or two M blocks whose A every CTA reads at once (calibrated on the dense GEMM only).
/// `allow_wide`: 256-row tiles (two 128-row waves per tile) are candidates. `contiguous`: the groups
/// lie in one flat layout of 128-aligned segments (ContiguousScheduler), where 256-row units run
/// across group boundaries, so a group of m rows costs ceil(m / 128) / 2 such tiles. Launches of at
/// most two waves of 128- or 256-row tiles with at least 8 K blocks get GemmConfig::direct_store (and
/// the stage it frees).
GemmConfig select_gemm_config(int64_t m, int64_t n, int64_t k, const GemmDeviceLimits& lim, int64_t groups = 1,
                              bool allow_split_k = false, bool allow_wide = true, bool contiguous = false);

/// Candidate dense configurations for a tuning sweep (`moekit bench gemm --sweep`): tiles of
/// 64/128 rows x 32...192 columns and 256 rows x 32...128 columns, split-K (64/128-row tiles) over
/// 1...8 CTAs where the tiles alone fill less than two waves, each with the most stages that fit
/// and a grid of whole clusters.
std::vector<GemmConfig> gemm_sweep_candidates(int64_t m, int64_t n, int64_t k, const GemmDeviceLimits& lim);

/// The MoE layer's fused GEMM1 (SwiGLU + FP8 requant epilogue): 64 x 256 tiles of the prepared
/// W1, as many stages as fit next to the epilogue's `epilogue_smem` bytes, at most one CTA per
/// tile of `rows_bound` rows x `n` prepared-W1 rows. With ≥ 128 expected rows per expert the two
/// 64-row tiles of each 128-row block run as a 2-CTA cluster sharing (multicasting) their B tile
/// (statically scheduled: a cluster's CTAs must take the same unit).
GemmConfig select_moe_gemm1_config(int64_t rows_bound, int64_t n, int64_t rows_per_expert, unsigned epilogue_smem,
                                   const GemmDeviceLimits& lim);

/// The MoE layer's fused GEMM2 (scatter-add epilogue, no staging buffer): the dense model's tile
/// for `groups` problems of `rows_per_group` x n x k, with the stages the freed staging memory allows.
GemmConfig select_moe_gemm2_config(int64_t rows_per_group, int64_t groups, int64_t rows_bound, int64_t n, int64_t k,
                                   const GemmDeviceLimits& lim);

/// The contiguous grouped GEMM's configuration for `rows` (a rows bound) over `groups` groups of
/// n x k: the grouped model's pick (or the GemmConfig string `forced`, when not empty), pairs only
/// where they share A, single CTAs when `dynamic` (tile counter), at most one CTA per tile.
/// Defined beside the launch (grouped_gemm.cpp); the MoE plan picks the rows GEMM2's with it.
GemmConfig select_grouped_contiguous_config(int64_t rows, int64_t groups, int64_t n, int64_t k, bool dynamic,
                                            const GemmDeviceLimits& lim, const std::string& forced = {});

/// Whether configuration `c` runs MXFP4 B in B-sharing pairs (kernels/sm90/mxfp4_loader.cuh): a
/// cluster of two 64-row tiles of one 128-row block (the MoE GEMM1's pairs), each CTA expanding
/// half of the B tile's rows, whole 32-row sub-chunks.
bool mxfp4_pairs_fit(const GemmConfig& c);

/// Adapts a configuration to MXFP4 B (the *Mxfp4 kernels, kernels/sm90/mxfp4_loader.cuh): no
/// split-K, B-sharing pairs where `c` asks for a cluster of two and mxfp4_pairs_fit (else single
/// CTAs), BLOCK_N rounded up to a multiple of 32 (a supported width), then `stages` expanded stages
/// (fewer if they do not fit) and as many raw slots as fit next to them and the epilogue's
/// `epilogue_smem` bytes (~0u: the bf16 D tile, or none with direct stores), at most 16. Returns
/// the raw slots (0: none fit).
int fit_mxfp4_stages(GemmConfig& c, unsigned epilogue_smem, int stages, const GemmDeviceLimits& lim);

/// Empty if `c` can run this shape on this device, else the reason.
std::string gemm_config_problem(const GemmConfig& c, const GemmDeviceLimits& lim);

}  // namespace moekit::detail
