// sm90 FP8 block-scaled GEMM family (DeepSeek-V3 "1D2D" scaling): D = A · Bᵀ with A scaled per
// 1x128 block (per row and K block) and B per 128x128 block.
//
// Structure (one CTA per SM, persistent):
//   * producer warpgroup — one warp runs the scheduler and publishes the tiles
//     (TilePipe); another warp (the load warp) takes them and, for every K block, waits for a
//     free stage, then one elected lane issues TMA loads of the A tile, the B tile and the A
//     scales onto that stage's `full` mbarrier (MXFP4 B: two load threads, mxfp4_loader.cuh). The warpgroup
//     gives most of its registers to the math warpgroups (setmaxnreg).
//   * math warpgroups — one per 64 rows of BLOCK_M (of each 128-row wave of a 256-row tile). Per K
//     block: wait `full`, run 4 FP8 wgmma
//     (k = 32 each) into a temporary accumulator, wait for them, release the stage (`empty`), then
//     promote: out += (sa_row · sb) · acc in FP32 registers. The FP8 tensor-core accumulator keeps
//     too few bits for long K, so this two-level accumulation is required for accuracy.
//   * the epilogue policy writes `out` (here: bf16 via stmatrix + TMA store).
// The scheduler and the epilogue are template policies, so grouped (MoE) variants reuse this
// mainloop unchanged.
//
// Files: fp8_gemm_traits.cuh (tile traits), fp8_gemm_math.cuh (MMA and promotion),
// fp8_gemm_loaders.cuh (tile pipe, B walk, A loads, gathered A), mxfp4_loader.cuh (MXFP4 B: raw
// codes and their expansion into the B stages), fp8_gemm_mainloop.cuh (the kernel's roles);
// one entry header per host launcher: gemm.cuh, grouped_gemm.cuh, moe_gemm.cuh.
#pragma once
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "ptx/ptx.cuh"

namespace moekit::sm90 {


template <int kBlockM_, int kBlockN_, int kStages_, int kCluster_, int kWgN_ = 1, int kSbRows_ = 128,
          int kPromoteK_ = 128, int kSplitK_ = 1, int kMxStages_ = 0>
struct Fp8GemmTraits {
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  /// CTAs per cluster (multicast pairs, gemm_cluster_shares_a): 128- and 64-row tiles pair along M
  /// and each CTA loads half of the shared B tile for both (MXFP4 B: expands it and copies it to
  /// the peer, mxfp4_loader.cuh); 256-row tiles pair along N and each CTA loads one of the shared A
  /// tile's two 128-row boxes for both.
  static constexpr int kCluster = kCluster_;
  /// Math warpgroups along N: 1 (each owns 64 rows x BLOCK_N) or 2 (each owns 64 rows x BLOCK_N/2,
  /// sharing the A tile: the MoE GEMM1 tile whose gate and up halves must meet in one CTA).
  static constexpr int kWgN = kWgN_;
  /// Row waves per tile (gemm_waves): a 256-row tile runs as two 128-row waves.
  static constexpr int kWaves = gemm_waves(kBlockM);
  /// The cluster's CTAs share A (pairs along N) rather than B (pairs along M).
  static constexpr bool kShareA = gemm_cluster_shares_a(kBlockM, kCluster_);
  /// Math warpgroups along M: one per 64 rows of a wave.
  static constexpr int kWgM = gemm_wave_rows(kBlockM) / 64;
  /// Rows of B per B-scale block along N: 128 (SPEC weights) or 64 (prepared, interleaved W1).
  static constexpr int kSbRows = kSbRows_;
  static constexpr int kWgCols = kBlockN / kWgN;  ///< accumulator columns per math warpgroup
  /// K per tensor-core accumulation chain: 128 (one chain per K block) or 64 / 32 (2 / 4 chains
  /// per K block, summed in FP32 and promoted once). The FP8 tensor-core accumulator loses precision
  /// as its chain grows (measured, GemmFp8Probe: bf16 outputs off the correctly rounded value 5.9% →
  /// 3.8% → 2.2% for 128 → 64 → 32); the MoE GEMM1 uses shorter chains because its output is
  /// requantized to FP8, which turns such errors into whole E4M3 steps. Shorter chains run the
  /// serial schedule below (no overlap of a warpgroup's FP32 work with its own MMAs).
  static constexpr int kPromoteK = kPromoteK_;
  static constexpr int kSplit = 128 / kPromoteK;
  /// CTAs per cluster along K (split-K, DenseScheduler + SplitKReduce); 1 = each CTA owns its tiles.
  static constexpr int kSplitK = kSplitK_;
  /// CTAs per thread-block cluster (multicast pairs along M, or the split-K group).
  static constexpr int kClusterSize = kCluster * kSplitK;
  static constexpr int kMathWarpgroups = kWgM * kWgN;
  static constexpr int kMathThreads = 128 * kMathWarpgroups;
  static constexpr int kThreads = gemm_num_threads(kBlockM, kWgN, kMxStages_ > 0);
  static constexpr u32 kSmemA = gemm_smem_a_bytes(kBlockM);
  static constexpr u32 kSmemB = gemm_smem_b_bytes(kBlockN);
  static constexpr u32 kSmemSfa = gemm_smem_sfa_bytes(kBlockM);
  static constexpr u32 kStageTxBytes = gemm_stage_tx_bytes(kBlockM, kBlockN);
  /// A warpgroup's columns never straddle a B-scale block: one B scale per K block.
  static constexpr bool kUniformSfb = (kSbRows % kWgCols == 0);
  /// A warpgroup's columns start on a B-scale block boundary (tiles start at multiples of BLOCK_N,
  /// and BLOCK_N and the warpgroup's width are whole blocks — the MoE GEMM1's 128 columns = gate
  /// block + up block): which chunks use the second B scale is known at compile time, so the
  /// promotion selects no scale per chunk (measured: ALU pipe 36% active in the prefill GEMM1).
  static constexpr bool kAlignedSfb = !kUniformSfb && kBlockN % kSbRows == 0 && kWgCols % kSbRows == 0;
  /// 256-row tiles of SPEC weights (one warpgroup column, 128-row scale blocks) read their B
  /// scales from shared memory, staged per tile by the scheduler warp (TilePipe::push; K <=
  /// kGemmMaxStagedKb blocks). Measured (H100, docs/performance.md §B-scale reads): 256 x 128 tiles
  /// −2…−5% (4096x32768x512 154.4 → 147.3 µs), 128-row tiles +3% (4096x2112x7168 m128n128 118.4 →
  /// 121–123), so those keep the L1 path.
  /// (MXFP4 GEMM2 tiles staging them measured neutral: deepseek-v3 T = 64 939 → 932 µs.)
  static constexpr bool kStageSb = kWgN == 1 && kSbRows == 128 && kWaves == 2;
  static constexpr u32 kSbRowsStaged = gemm_sb_stage_rows(kBlockN);
  static constexpr u32 kSbStageFloats = gemm_sb_stage_floats(kBlockM, kBlockN);
  /// Straddling tiles (neither kUniformSfb nor kAlignedSfb): tiles start at multiples of BLOCK_N,
  /// so a tile's first B-scale block ends at a multiple of gcd(128, BLOCK_N) columns, and its
  /// 8-column chunks go in groups of that width that share one scale (BLOCK_N 192: three groups
  /// of 64 instead of 24 chunks; measured 4096x2112x7168 m128n192 121.1 → 106.2 µs,
  /// docs/performance.md §Tile widths that straddle B-scale blocks).
  static constexpr u32 kSbChunkGroup = u32(gemm_gcd(kSbRows, kWgCols)) / 8;
  /// MXFP4 B (mxfp4_loader.cuh), 0 = FP8 B: the load thread streams the packed codes into this many
  /// raw slots, and a second producer warpgroup expands each into an E4M3 B stage.
  static constexpr int kMxStages = kMxStages_;
  static constexpr bool kMxfp4 = kMxStages_ > 0;
  /// MXFP4 B rows this CTA loads and expands (gemm_mx_raw_rows): in B-sharing pairs each CTA
  /// expands its rank's half of the tile into its own stage and copies it into its peer's.
  static constexpr int kMxRawRows = gemm_mx_raw_rows(kBlockN_, kCluster_);
  /// Registers per thread after setmaxnreg (64 K per SM: 128 x (math warpgroups x kMathRegs +
  /// kProducerRegs + with MXFP4 B the expansion warpgroup's kExpandRegs)). MXFP4 B: enough for the
  /// expansion to keep several jobs' loads in flight; with two math warpgroups the math gets 216,
  /// and on GEMM1 (kWgN = 2: 64 + 2 x 64 accumulators per thread) 208, so that the expansion keeps
  /// four jobs in flight (MOEKIT_MXFP4_EXPAND_REGS: an A/B define).
  static constexpr u32 kProducerRegs = !kMxfp4 ? 40u : (kMathWarpgroups == 1 ? 136u : 40u);
#ifndef MOEKIT_MXFP4_EXPAND_REGS
#define MOEKIT_MXFP4_EXPAND_REGS 56
#endif
  static constexpr u32 kExpandRegs =
      !kMxfp4 ? 0u : kMathWarpgroups == 1 ? 136u : kWgN == 2 ? u32(MOEKIT_MXFP4_EXPAND_REGS) : 40u;
  static constexpr u32 kMathRegs = !kMxfp4 || kMathWarpgroups == 1 ? 232u : (512u - kProducerRegs - kExpandRegs) / 2u / 8u * 8u;
  static_assert(kMathWarpgroups * kMathRegs + kProducerRegs + kExpandRegs <= 512u, "64 K registers per SM");
  static_assert(!kMxfp4 || (kExpandRegs % 8 == 0 && kExpandRegs >= 24 && kExpandRegs <= 256),
                "setmaxnreg counts: multiples of 8 in [24, 256]");

  static_assert(gemm_block_m_supported(kBlockM), "BLOCK_M must be 64, 128 or 256");
  static_assert(kWaves == 1 || (kWgN == 1 && kBlockN <= 128 && kPromoteK_ == 128 && kSplitK_ == 1),
                "256-row tiles: one warpgroup column, BLOCK_N <= 128, chains of 128, no split-K");
  static_assert(kWgN == 1 ? gemm_block_n_supported(kBlockN) : (kWgN == 2 && kWgCols % 8 == 0 && kWgCols <= 128),
                "unsupported BLOCK_N");
  static_assert(kSbRows == 128 || kSbRows == 64, "B-scale blocks of 128 or 64 rows");
  static_assert(kWgCols <= 2 * kSbRows, "a warpgroup's columns may span at most two B-scale blocks");
  static_assert(kStages >= 2, "need at least two stages");
  static_assert(kPromoteK == 128 || kPromoteK == 64 || kPromoteK == 32, "chains of 128, 64 or 32 of K");
  static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 CTAs");
  static_assert(kSplitK >= 1 && kSplitK <= kGemmMaxSplitK && (kSplitK == 1 || kCluster == 1),
                "split-K over 1..8 CTAs, without multicast");
  static_assert(kShareA || (kSmemB / kCluster) % 1024 == 0, "each multicast slice of B must stay 1024-byte aligned");
  static_assert(kSmemA % 1024 == 0 && kSmemB % 1024 == 0, "swizzled tiles must stay 1024-byte aligned");
  static_assert(kSmemSfa % 128 == 0, "TMA destinations must stay 128-byte aligned");
  static_assert(!kMxfp4 || (!kShareA && kSplitK == 1 && kMxRawRows % 32 == 0 && kMxStages <= 16),
                "MXFP4 B: single CTAs or B-sharing pairs, no split-K, whole 32-row sub-chunks per CTA, at most 16 raw slots");
};

/// Diagnostic switches for A/B runs only — the results are wrong (docs/performance.md §Energy and the power limit). They can be set
/// only through knobs().jit_defines (MOEKIT_JIT_DEFINES), i.e. only in a -DMOEKIT_DIAGNOSTICS=ON
/// build: MOEKIT_DIAG_NO_LOADS=1: the load warp fills each stage once, then only arrives on it
/// (no TMA traffic after the first kStages K blocks); MOEKIT_DIAG_NO_PROMOTE=1: the chained schedule
/// (kPromoteK < 128) skips its FP32 work except in the last K block; MOEKIT_DIAG_NO_EPILOGUE
/// (fp8_gemm_layout.cuh).
#ifndef MOEKIT_DIAG_NO_LOADS
#define MOEKIT_DIAG_NO_LOADS 0
#endif
#ifndef MOEKIT_DIAG_NO_PROMOTE
#define MOEKIT_DIAG_NO_PROMOTE 0
#endif
#ifndef MOEKIT_KLOOP_EARLY_WAIT
#define MOEKIT_KLOOP_EARLY_WAIT 0
#endif
#ifndef MOEKIT_K_ROTATE
#define MOEKIT_K_ROTATE 0
#endif

/// Experiment (MOEKIT_K_ROTATE): tiles start their K loop at different K blocks (by their N block),
/// so that the CTAs of one M block do not request the same A lines at once; not with split-K, the
/// gathered A or MXFP4 B.
template <class T, bool kGatherA>
inline constexpr bool kGemmKRotates = MOEKIT_K_ROTATE != 0 && T::kSplitK == 1 && !kGatherA && !T::kMxfp4;
/// The first K block of tile (m0, n0) under kGemmKRotates.
template <class T>
__device__ __forceinline__ u32 gemm_k_rotation(u32 n0, u32 m0, u32 num_kb) {
  return (n0 / u32(T::kBlockN) + m0 / u32(T::kBlockM) * 5u) % num_kb;
}
/// The K block that step `kb` of a tile whose K loop starts at `rot` reads.
__device__ __forceinline__ u32 gemm_rotated_kb(u32 kb, u32 rot, u32 num_kb) {
  const u32 r = kb + rot;
  return r < num_kb ? r : r - num_kb;
}

}  // namespace moekit::sm90
