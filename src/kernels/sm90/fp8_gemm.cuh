// sm90 FP8 block-scaled GEMM family (DeepSeek-V3 "1D2D" scaling): D = A · Bᵀ with A scaled per
// 1x128 block (per row and K block) and B per 128x128 block.
//
// Structure (one CTA per SM, persistent):
//   * producer warpgroup — one warp runs the scheduler and its lane 0 publishes the tiles
//     (TilePipe); one thread of another warp takes them and, for every K block, waits for a free stage, then issues TMA loads
//     of the A tile, the B tile and the A scales onto that stage's `full` mbarrier. The warpgroup
//     gives most of its registers to the math warpgroups (setmaxnreg).
//   * math warpgroups — one per 64 rows of BLOCK_M (of each 128-row wave of a 256-row tile). Per K
//     block: wait `full`, run 4 FP8 wgmma
//     (k = 32 each) into a temporary accumulator, wait for them, release the stage (`empty`), then
//     promote: out += (sa_row · sb) · acc in FP32 registers. The FP8 tensor-core accumulator keeps
//     too few bits for long K, so this two-level accumulation is required for accuracy.
//   * the epilogue policy writes `out` (here: bf16 via stmatrix + TMA store).
// The scheduler and the epilogue are template policies, so grouped (MoE) variants reuse this
// mainloop unchanged.
#pragma once
#include "kernels/sm90/epilogue_bf16.cuh"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "kernels/sm90/scheduler.cuh"
#include "kernels/sm90/split_k.cuh"
#include "ptx/ptx.cuh"
#include "ptx/wgmma_fp8.cuh"

namespace moekit::sm90 {

template <int kBlockM_, int kBlockN_, int kStages_, int kCluster_, int kWgN_ = 1, int kSbRows_ = 128,
          int kPromoteK_ = 128, int kSplitK_ = 1>
struct Fp8GemmTraits {
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  /// CTAs per cluster (multicast pairs, gemm_cluster_shares_a): 128- and 64-row tiles pair along M
  /// and each CTA loads half of the shared B tile for both; 256-row tiles pair along N and each CTA
  /// loads one of the shared A tile's two 128-row boxes for both.
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
  static constexpr int kThreads = gemm_num_threads(kBlockM, kWgN);
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
  static constexpr u32 kProducerRegs = 40;
  static constexpr u32 kMathRegs = 232;

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
};

/// Compile-time switch for A/B runs (MOEKIT_JIT_DEFINES=MOEKIT_WG_ORDER=0): Fp8GemmMath::kOrdered.
#ifndef MOEKIT_WG_ORDER
#define MOEKIT_WG_ORDER 1
#endif
/// Compile-time switch for A/B runs: 256-row tiles take issue turns per wave (1) or not (0, the
/// default: turns measured 2.5% slower on the contiguous 4 x 8192 (4096, 7168) case and 2% on
/// dense 4096x7168x16384, perf-notes v21).
#ifndef MOEKIT_WAVE_ORDER
#define MOEKIT_WAVE_ORDER 0
#endif
/// Diagnostic switches for A/B runs only — the results are wrong (perf-notes v18):
/// MOEKIT_DIAG_NO_LOADS=1: the load thread fills each stage once, then only arrives on it (no TMA
/// traffic after the first kStages K blocks); MOEKIT_DIAG_NO_PROMOTE=1: the chained schedule
/// (kPromoteK < 128) skips its FP32 work except in the last K block; MOEKIT_DIAG_NO_EPILOGUE
/// (fp8_gemm_layout.cuh).
#ifndef MOEKIT_DIAG_NO_LOADS
#define MOEKIT_DIAG_NO_LOADS 0
#endif
#ifndef MOEKIT_DIAG_NO_PROMOTE
#define MOEKIT_DIAG_NO_PROMOTE 0
#endif
/// Compile-time switches for A/B runs, -1 = the per-kernel default (Fp8GemmMath::kSbAhead,
/// kSbPrefetch): MOEKIT_SB_AHEAD 0 / 1, MOEKIT_SB_PREFETCH 0 / 1 / 2 / 3.
#ifndef MOEKIT_SB_AHEAD
#define MOEKIT_SB_AHEAD -1
#endif
#ifndef MOEKIT_SB_PREFETCH
#define MOEKIT_SB_PREFETCH -1
#endif

/// Prefetches into L1 the 128-byte lines holding the `n` floats at `row`, from its first line or
/// (skip_first) its second.
__device__ __forceinline__ void prefetch_l1_lines(const float* row, u32 n, bool skip_first) {
  const ptx::u64 last = reinterpret_cast<ptx::u64>(row + n - 1) & ~ptx::u64(127);
  ptx::u64 line = (reinterpret_cast<ptx::u64>(row) & ~ptx::u64(127)) + (skip_first ? 128u : 0u);
  for (; line <= last; line += 128) ptx::prefetch_l1(reinterpret_cast<const void*>(line));
}

/// Scales of one K block for this thread's two rows (per wave).
struct KBlockScales {
  float sa0, sa1;  ///< A scales of rows r0 and r0 + 8
  float sb0, sb1;  ///< B scales of the tile's first and (if straddling) second 128-row block
  float sa2 = 0.0f, sa3 = 0.0f;  ///< 256-row tiles: A scales of the same rows in wave 1 (+128)
};

/// The math warpgroups' side of the mainloop: consume stages, MMA, promote, run the epilogue.
///
/// Two K-loop schedules:
///  * pipelined (3·BLOCK_N/2 accumulator registers fit, BLOCK_N ≤ 128): two accumulator sets;
///    K block kb+1's wgmmas are issued before kb's are waited for (wgmma.wait_group 1), so this
///    warpgroup's FP32 promotion of kb overlaps its own tensor-core work on kb+1.
///  * serial (wider tiles): issue, wait for all, promote; overlap comes only from the other math
///    warpgroup.
///  * chained (kPromoteK < 128): the K block's parts each start a fresh tensor-core chain, their
///    FP32 sums are added and promoted once; serial like the above.
///  * waves (256-row tiles, T::kWaves = 2): per K block each warpgroup issues its 64 rows of wave
///    0 into the one accumulator set, waits, promotes into wave 0's sums, then the same for wave
///    1 (rows + 128); the sums of both waves (2 x BLOCK_N/2 registers) stay live. A stage serves
///    twice the MMAs of a 128-row tile for 1.5x its bytes (A 32 KB + B 16 KB for 256 x 128), so
///    shared-memory fill traffic from L2 per MMA drops by a quarter (DeepGEMM's BLOCK_M = 256).
/// kGatherA: A arrives by cp.async (GatherALoader), written by the generic proxy, so each stage
/// is fenced towards the async proxy (wgmma) after its wait (the full fence.proxy.async: the
/// acquire-only form compiles to no instruction but measured 2.5% slower at T = 1024, perf-notes
/// v13); the A scales are read from the
/// token-major scales in global memory by each row's token, one K block ahead (their L2 latency
/// exposed in every K block measured +2 µs at T = 1 and +8% at T = 1024, perf-notes v13).
template <class T, bool kGatherA = false>
struct Fp8GemmMath {
  using Mma = ptx::WgmmaE4M3<T::kWgCols>;
  static constexpr int kAcc = T::kWgCols / 2;
  /// The FP32 sums a thread keeps: kAcc per wave.
  static constexpr int kOut = kAcc * T::kWaves;
  /// Floats between the A-scale boxes of the waves in a stage.
  static constexpr u32 kSfaWave = gemm_sfa_wave_floats(T::kBlockM);
  static constexpr bool kPipelined = 3 * kAcc <= 192;
  /// Two math warpgroups stacked along M take turns issuing their K blocks' wgmmas (named barriers
  /// kOrderBar and kOrderBar + 1), so the tensor cores run one warpgroup's K block, then the
  /// other's, and each warpgroup's FP32 promotion overlaps the other's MMAs instead of both
  /// promoting at once. Measured (perf-notes v14): dense 128 x 128 tiles −3%, contiguous grouped
  /// −1.6…−4%; the MoE GEMM1's side-by-side warpgroups (kWgN = 2, chained serial schedule, B
  /// multicast pairs) +4% at T = 4096, so they keep no order, and neither does the chained schedule
  /// (measured only there).
  static constexpr bool kOrdered =
      T::kWgM == 2 && T::kWgN == 1 && T::kSplit == 1 && MOEKIT_WG_ORDER && (T::kWaves == 1 || MOEKIT_WAVE_ORDER);
  static constexpr u32 kOrderBar = 2;  // 1 is the epilogues'
  /// How the B scales (one per K block, read through L1 from rows of num_kb floats) reach the
  /// promotion without waiting on a miss — at a CTA's first tile the row's lines are cold in L2 too,
  /// and a new line starts every 32 K blocks. Measured per kernel (H100, perf-notes v33):
  ///  * kSbAhead: each K block's scales are loaded one K block ahead (the first by begin_tile)
  ///    instead of after the stage's wait. The MoE GEMM1 (side-by-side warpgroups, kWgN = 2): prefill
  ///    stage −0.8%; the 256-row tiles +1.6…+2.5% (contiguous 4 x 8192 (4096, 7168)).
  ///  * kSbPrefetch: begin_tile prefetches the rows' lines into L1 — 0 none, 1 every line of every
  ///    tile, 2 every line of a CTA's first tile (whose loads leave time to spare) and all but the
  ///    first line of the later ones, 3 only the first tile's. Mode 2: DeepGEMM's masked rows −2…−3%,
  ///    dense 1024x4096x7168 −3%, contiguous −0.5%; on the MoE GEMM1 +0.6%. Mode 1 was slower on the
  ///    short-K tiles of long launches (+1…+1.5%): prefetching the line a K loop is about to read
  ///    costs more than the miss.
  static constexpr bool kSbAhead = MOEKIT_SB_AHEAD < 0 ? T::kWgN == 2 : MOEKIT_SB_AHEAD != 0;
  static constexpr int kSbPrefetch = MOEKIT_SB_PREFETCH < 0 ? (kSbAhead ? 0 : 2) : MOEKIT_SB_PREFETCH;

  const GemmParams& p;
  u32 s_a, s_b, s_full, s_empty;
  const float* sfa_smem;
  MathThread th;
  u32 r0;  // this thread's rows in its warpgroup's 64: r0 and r0 + 8
  u32 stage = 0, phase = 0;
  // Per tile:
  const float* sb_row0 = nullptr;
  const float* sb_row1 = nullptr;
  u32 num_former = 0;  // 8-column chunks that use the first B-scale block
  u32 sfa_row = 0;     // this thread's first row in the A-scale stage (r0 + m0 % 4)
  u32 tok0 = 0, tok1 = 0;  // kGatherA: the tokens of this thread's two rows (0 for rows without one)
  float pre_sa0 = 0.0f, pre_sa1 = 0.0f;  // kGatherA: their scales of the next K block
  float pre_sb0 = 0.0f, pre_sb1 = 0.0f;  // kSbAhead: the next K block's B scales
  // Warpgroups stacked along M (kWgM = 2) on a tile of at most 64 valid rows (a half tile,
  // GemmParams::tail_halves, or a short group's tile): warpgroup 1 skips the tile's K loop
  // (`active` 0; its stage and phase advance by arithmetic), warpgroup 0 releases each stage for
  // both (`arrivals` 2), and the issue order pauses (`order_on` 0). A K loop of its own for the
  // idle warpgroup (waiting and releasing each stage) measured 4-9% slower on the dense M = 4096
  // shapes: ptxas then kept the stage addresses out of the uniform registers (perf-notes v20).
  u32 active = 1, order_on = 1, arrivals = 1;
  u32 waves = 1;  // 256-row tiles: waves with valid rows (1 or 2; warp-uniform)

  /// kGatherA: requests the A scales of K block kb (used by the next wait_stage).
  __device__ __forceinline__ void prefetch_sa(u32 kb) {
    const float* sa = p.sa_gather + ptx::u64(kb) * p.sa_gather_ld;
    pre_sa0 = ptx::ld_chain(sa + tok0);
    pre_sa1 = ptx::ld_chain(sa + tok1);
  }

  __device__ __forceinline__ void advance() {
    if (++stage == T::kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }

  /// first_tile: the CTA's first (its loads are still on their way: time to spare).
  __device__ __forceinline__ void begin_tile(const Tile& t, bool first_tile) {
    // One B-scale block, or two when this warpgroup's columns straddle a block boundary. Read from
    // global memory through L1 (warp-uniform), as kSbAhead and kSbPrefetch say.
    const float* sb = p.sb + t.sb_offset;
    const u32 n_wg = t.n0 + th.wn * u32(T::kWgCols);
    // (Clamped: the ghost tile of an A-sharing pair past N reads the last block's scales.)
    const u32 blk0 = min(n_wg / u32(T::kSbRows), p.num_n_sb - 1u);
    const u32 blk1 = (blk0 + 1 < p.num_n_sb) ? blk0 + 1 : blk0;
    sb_row0 = sb + blk0 * p.num_kb;
    sb_row1 = sb + blk1 * p.num_kb;
    const u32 left = u32(T::kSbRows) - n_wg % u32(T::kSbRows);
    num_former = T::kUniformSfb ? u32(T::kWgCols) / 8 : (left < u32(T::kWgCols) ? left : u32(T::kWgCols)) / 8;
    if (kSbPrefetch != 0 && (kSbPrefetch != 3 || first_tile)) {
      const bool skip_first = kSbPrefetch == 2 && !first_tile;
      prefetch_l1_lines(sb_row0, p.num_kb, skip_first);
      if (!T::kUniformSfb && blk1 != blk0) prefetch_l1_lines(sb_row1, p.num_kb, skip_first);
    }
    if constexpr (kSbAhead) {
      const u32 kb0 = T::kSplitK > 1 && t.kb_begin < p.num_kb ? t.kb_begin : 0u;
      pre_sb0 = __ldg(sb_row0 + kb0);
      pre_sb1 = T::kUniformSfb ? pre_sb0 : __ldg(sb_row1 + kb0);
    }
    sfa_row = th.wm * 64 + r0 + (t.m0 & 3u);
    if constexpr (T::kWaves > 1) waves = ptx::warp_uniform(t.valid_rows > 128u ? 2u : 1u);
    if constexpr (T::kWgM == 2 && T::kCluster == 1) {  // (releases into a cluster arrive once per warp)
      const u32 rows = ptx::warp_uniform(t.valid_rows);
      order_on = rows > 64u ? 1u : 0u;
      active = th.wm == 0 || order_on ? 1u : 0u;  // warpgroup 0 always consumes the stages
      arrivals = th.wm == 0 && !order_on ? 2u : 1u;
    }
    if constexpr (kGatherA) {
      auto token_of = [&](u32 row) {
        const int e = row < t.valid_rows ? ptx::ld_chain(p.row_map + t.m0 + row) : -1;
        return e >= 0 ? u32(e) / p.top_k : 0u;  // a row without a token reads any valid scale
      };
      tok0 = token_of(th.wm * 64 + r0);
      tok1 = token_of(th.wm * 64 + r0 + 8);
    }
  }

  /// Waits for the current stage and reads its scales (K blocks in order from the tile's first).
  __device__ __forceinline__ KBlockScales wait_stage(u32 kb) {
    KBlockScales s;
    if constexpr (kSbAhead) {
      // Loaded one K block ago; the next K block's are requested before the wait.
      s.sb0 = pre_sb0;
      s.sb1 = pre_sb1;
      const u32 kn = kb + 1 < p.num_kb ? kb + 1 : kb;
      pre_sb0 = __ldg(sb_row0 + kn);
      pre_sb1 = T::kUniformSfb ? pre_sb0 : __ldg(sb_row1 + kn);
    }
    ptx::mbar_wait(s_full + 8 * stage, phase);
    if constexpr (kGatherA) {
      ptx::fence_proxy_async_smem();
      s.sa0 = pre_sa0;
      s.sa1 = pre_sa1;
      if (kb + 1 < p.num_kb) prefetch_sa(kb + 1);
    } else {
      const float* sfa = sfa_smem + stage * (T::kSmemSfa / 4);  // stages are padded past the box
      s.sa0 = sfa[sfa_row];
      s.sa1 = sfa[sfa_row + 8];
      if constexpr (T::kWaves > 1) {  // (stale in a tile without wave 1, and then unused)
        s.sa2 = sfa[kSfaWave + sfa_row];
        s.sa3 = sfa[kSfaWave + sfa_row + 8];
      }
    }
    if constexpr (!kSbAhead) {
      s.sb0 = __ldg(sb_row0 + kb);
      s.sb1 = T::kUniformSfb ? s.sb0 : __ldg(sb_row1 + kb);
    }
    return s;
  }

  /// Issues part `part` of the current stage's four k=32 wgmmas (all four with one promotion per
  /// K block, else 4 / kSplit of them) into `acc`, overwriting it, and commits; `wave`: the rows
  /// of that wave (+128 each).
  __device__ __forceinline__ void issue(float (&acc)[kAcc], u32 part = 0, u32 wave = 0) {
    constexpr u32 kPerPart = kGemmBlockK / 32 / u32(T::kSplit);
    const ptx::u64 desc_a =
        ptx::smem_desc_k_sw128(s_a + stage * T::kSmemA + (wave * 128 + th.wm * 64) * kGemmBlockK);
    const ptx::u64 desc_b = ptx::smem_desc_k_sw128(s_b + stage * T::kSmemB + th.wn * T::kWgCols * kGemmBlockK);
#pragma unroll
    for (int i = 0; i < kAcc; ++i) ptx::fence_operand(acc[i]);
    __syncwarp();  // wgmma is .sync.aligned: every lane must arrive converged
    ptx::wgmma_fence();
#pragma unroll
    for (u32 j = 0; j < kPerPart; ++j) {
      const u32 k = part * kPerPart + j;
      Mma::mma(desc_a + 2 * k, desc_b + 2 * k, acc, j);
    }
    ptx::wgmma_commit();
  }

  /// Issue order (kOrdered): waits until the other warpgroup has issued its previous K block.
  __device__ __forceinline__ void take_turn() {
    if constexpr (kOrdered)
      if (order_on) ptx::named_barrier_sync(kOrderBar + th.warpgroup, 2 * 128);
  }
  /// Lets the other warpgroup issue its next K block. Warpgroup 1 passes once before its first
  /// turn and warpgroup 0 takes one turn after its last (order_end), so the barriers balance; a
  /// tile without order_on moves no turn.
  __device__ __forceinline__ void pass_turn() {
    if constexpr (kOrdered)
      if (order_on) ptx::named_barrier_arrive(kOrderBar + 1 - th.warpgroup, 2 * 128);
  }
  __device__ __forceinline__ void order_begin() {
    order_on = 1;
    if (th.warpgroup == 1) pass_turn();
  }
  __device__ __forceinline__ void order_end() {
    order_on = 1;
    if (th.warpgroup == 0) take_turn();
  }

  /// Lets every producer of the cluster refill stage `st` (its wgmmas have completed).
  __device__ __forceinline__ void release(u32 st) {
    if (th.lane != 0) return;
    if constexpr (T::kCluster > 1) {
#pragma unroll
      for (u32 r = 0; r < u32(T::kCluster); ++r) ptx::mbar_arrive_cluster(ptx::map_to_cta(s_empty + 8 * st, r));
    } else {
      ptx::mbar_arrive_count(s_empty + 8 * st, arrivals);
    }
  }

  /// The idle warpgroup's side of a tile of `num` K blocks (`active` 0): its stage and phase move
  /// past them without waiting (warpgroup 0 consumes and releases them, and the math warpgroups
  /// meet at a named barrier after the K loop, so no later wait of this warpgroup can run a
  /// whole phase ahead of a stage's barrier).
  __device__ __forceinline__ void skip_stages(u32 stage0, u32 phase0, u32 num) {
    const u32 s = stage0 + num;
    phase = phase0 ^ ((s / u32(T::kStages)) & 1u);
    stage = s % u32(T::kStages);
  }

  /// out += (sa · sb) · acc, with the second B scale for chunks past the scale-block boundary;
  /// kWave: the wave whose sums (out[kWave * kAcc, +kAcc)) and A scales apply.
  template <int kWave = 0>
  __device__ __forceinline__ void promote(float (&out_all)[kOut], float (&acc)[kAcc], const KBlockScales& s) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) ptx::fence_operand(acc[i]);
    float* out = out_all + kWave * kAcc;
    const float sa0 = kWave == 0 ? s.sa0 : s.sa2, sa1 = kWave == 0 ? s.sa1 : s.sa3;
    const float s00 = sa0 * s.sb0, s10 = sa1 * s.sb0;
    const float s01 = sa0 * s.sb1, s11 = sa1 * s.sb1;
#pragma unroll
    for (u32 i = 0; i < u32(T::kWgCols) / 8; ++i) {
      const bool first = T::kUniformSfb || (T::kAlignedSfb ? i < u32(T::kSbRows) / 8 : i < num_former);
      const float lo = first ? s00 : s01;
      const float hi = first ? s10 : s11;
      out[4 * i + 0] += lo * acc[4 * i + 0];
      out[4 * i + 1] += lo * acc[4 * i + 1];
      out[4 * i + 2] += hi * acc[4 * i + 2];
      out[4 * i + 3] += hi * acc[4 * i + 3];
    }
  }

  /// Pipelined step: K block kb is in flight in `cur` (scales `sc`); the next stage is waited for
  /// and issued into `nxt` before `cur` is retired (wait_group 1), released and promoted.
  __device__ __forceinline__ void step(float (&out)[kOut], float (&cur)[kAcc], float (&nxt)[kAcc], u32 kb,
                                       KBlockScales& sc) {
    const u32 cur_stage = stage;
    advance();
    const KBlockScales next_sc = wait_stage(kb + 1);
    take_turn();
    issue(nxt);
    pass_turn();
    ptx::wgmma_wait<1>();
    release(cur_stage);
    promote(out, cur, sc);
    sc = next_sc;
  }

  /// Retires the last K block (in `cur`).
  __device__ __forceinline__ void finish(float (&out)[kOut], float (&cur)[kAcc], const KBlockScales& sc) {
    ptx::wgmma_wait<0>();
    release(stage);
    advance();
    promote(out, cur, sc);
  }

  /// Accumulates K blocks [kb_begin, kb_end) of the current tile into `out` (zeroed first). A
  /// split-K share is never empty through the API (split_k <= num_kb is required); an empty one
  /// would contribute zeros.
  /// The waves schedule over K blocks [kb_begin, kb_end) with kLive waves holding valid rows.
  template <int kLive>
  __device__ __forceinline__ void k_loop_waves(float (&out)[kOut], u32 kb_begin, u32 kb_end) {
    float acc[kAcc];
    for (u32 kb = kb_begin; kb < kb_end; ++kb) {
      const KBlockScales sc = wait_stage(kb);
#pragma unroll
      for (int w = 0; w < kLive; ++w) {
        take_turn();
        issue(acc, 0, u32(w));
        pass_turn();
        ptx::wgmma_wait<0>();
        if (w == kLive - 1) release(stage);
        if (w == 0) promote<0>(out, acc, sc);
        else promote<kLive - 1>(out, acc, sc);
      }
      advance();
    }
  }

  __device__ __forceinline__ void k_loop(float (&out)[kOut], u32 kb_begin, u32 kb_end) {
#pragma unroll
    for (int i = 0; i < kOut; ++i) out[i] = 0.0f;
    if constexpr (T::kSplitK > 1) {
      if (kb_begin == kb_end) return;
    }
    if constexpr (T::kWaves > 1) {
      static_assert(T::kWaves == 2, "two waves at most");
      if (waves == 2) k_loop_waves<2>(out, kb_begin, kb_end);
      else k_loop_waves<1>(out, kb_begin, kb_end);
    } else if constexpr (kPipelined && T::kSplit > 1) {
      // Finer promotion. Each part of a K block (kPromoteK of K) starts its own tensor-core chain;
      // the parts' FP32 sums are added (exact to FP32 rounding) and promoted once per K block. Two
      // accumulator sets: parts 0 and 1 in flight together, then each further part into acc1 while
      // acc0 holds the running sum. Only the other math warpgroup overlaps this FP32 work: the
      // pipelined form (each part promoted under the next part's wgmmas; it compiles without
      // C7514 only if the loop can also be left right after a part 0 is issued) measured no
      // faster at prefill and 1-2% slower at T = 256...2048 (perf-notes v15).
      float acc0[kAcc], acc1[kAcc];
      for (u32 kb = kb_begin; kb < kb_end; ++kb) {
        const KBlockScales sc = wait_stage(kb);
        issue(acc0, 0);
#pragma unroll
        for (u32 part = 1; part < u32(T::kSplit); ++part) {
          issue(acc1, part);
          ptx::wgmma_wait<0>();
#pragma unroll
          for (int i = 0; i < kAcc; ++i) {
            ptx::fence_operand(acc0[i]);
            ptx::fence_operand(acc1[i]);
            acc0[i] += acc1[i];
          }
        }
        release(stage);
#if MOEKIT_DIAG_NO_PROMOTE
        if (kb + 1 == kb_end)
#endif
        promote(out, acc0, sc);
        advance();
      }
    } else if constexpr (kPipelined) {
      float acc0[kAcc], acc1[kAcc];
      KBlockScales sc = wait_stage(kb_begin);
      take_turn();
      issue(acc0);
      pass_turn();
      const u32 last = kb_end - 1;
      for (u32 kb = kb_begin;; kb += 2) {
        if (kb == last) {
          finish(out, acc0, sc);
          break;
        }
        step(out, acc0, acc1, kb, sc);
        if (kb + 1 == last) {
          finish(out, acc1, sc);
          break;
        }
        step(out, acc1, acc0, kb + 1, sc);
      }
    } else {
      static_assert(T::kSplit == 1, "finer promotion needs the pipelined schedule");
      float acc[kAcc];
      for (u32 kb = kb_begin; kb < kb_end; ++kb) {
        const KBlockScales sc = wait_stage(kb);
        take_turn();
        issue(acc);
        pass_turn();
        ptx::wgmma_wait<0>();
        release(stage);
        promote(out, acc, sc);
        advance();
      }
    }
  }
};

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

/// The tile pipe: the scheduler warp runs the scheduler and its lane 0 (the scheduler thread)
/// publishes each tile, then an end marker, into a ring of kGemmTileSlots records in shared memory; the load thread and the math
/// warpgroups take them in the same order. Per slot a `full` mbarrier (one arrival: the
/// scheduler thread) and an `empty` one (one arrival by every thread that takes the records).
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

  /// Scheduler thread: publishes `t` (more = false: the end marker, t ignored).
  __device__ __forceinline__ void push(const Tile& t, bool more) {
    ptx::mbar_wait(empty() + 8 * slot, phase ^ 1u);
    const u32 r = records + slot * kGemmTileRecordBytes;
    ptx::st_shared_v4(r, {t.m0, t.n0, t.b_row0, t.sb_offset});
    ptx::st_shared_v4(r + 16, {t.valid_rows, (more ? 1u : 0u) | (t.solo << 1), t.kb_begin, t.kb_end});
    ptx::mbar_arrive(full() + 8 * slot);  // release: the record is visible to the waiting threads
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
    t.solo = b[1] >> 1;
    return (b[1] & 1u) != 0;
  }

  /// Math, load or gather thread: waits for the next record and reads it (the slot stays held
  /// until release).
  __device__ __forceinline__ bool pop(Tile& t) {
    ptx::mbar_wait(full() + 8 * slot, phase);
    return peek(t);
  }

  /// Hands the held slot back to the scheduler thread. Every thread that read the record arrives
  /// itself (with one arrival per warp after __syncwarp, compute-sanitizer racecheck reported the
  /// other lanes' record reads as racing with the next push; perf-notes v15).
  __device__ __forceinline__ void release() {
    ptx::mbar_arrive(empty() + 8 * slot);
    advance();
  }
};

template <class T, class Epilogue, bool kGatherA>
__device__ __forceinline__ void fp8_gemm_math(const GemmParams& p, u32 s_d, u32 s_a, u32 s_b, u32 s_full,
                                              u32 s_empty, const float* sfa_smem, const ptx::TmaDescriptor& tma_d,
                                              TilePipe& tiles, SplitKReduce<T>& split) {
  // PDL: the math threads touch nothing global the previous kernel writes before it is done (the
  // producer may schedule earlier, GemmParams::pdl_early). The gather variant under pdl_early looks
  // up its first tile's tokens first (the row map is as old as the group layout), so that chain of
  // dependent reads overlaps the previous kernel instead of delaying the first MMAs.
  bool waited = p.pdl == 0;
  auto pdl_wait = [&] {
    ptx::griddep_wait();
    if (threadIdx.x == 0) ptx::griddep_launch_dependents();  // only after this CTA's wait
    waited = true;
  };
  if (!waited && !(kGatherA && p.pdl_early)) pdl_wait();
  Fp8GemmMath<T, kGatherA> m{p, s_a, s_b, s_full, s_empty, sfa_smem};
  // Broadcast, so that ptxas knows the warpgroup index is warp-uniform: the stage descriptors then
  // live in uniform registers instead of being rebuilt through R2UR for every wgmma (dense
  // 4096x7168x16384 -3.8%, perf-notes v15).
  const u32 wg = ptx::warp_uniform(threadIdx.x / 128);
  m.th.warpgroup = wg;
  m.th.wm = wg % u32(T::kWgM);
  m.th.wn = wg / u32(T::kWgM);
  m.th.warp = (threadIdx.x % 128) / 32;
  m.th.lane = ptx::lane_id();
  m.r0 = m.th.warp * 16 + m.th.lane / 4;

  float out[Fp8GemmMath<T, kGatherA>::kOut];
  m.order_begin();
  // Diagnostics (GemmParams::trace): timestamps go straight to global memory, so nothing extra
  // stays live in registers across the K loop.
  auto stamp = [&](u32 slot) {
    if (p.trace != nullptr && threadIdx.x == 0) {
      p.trace[kGemmTraceSlots * blockIdx.x + slot] = ptx::globaltimer();
      if (slot == 2 || slot == 3)
        p.trace[kGemmTraceSlots * blockIdx.x + kGemmTraceSlotClock + slot - 2] = ptx::clock64();
    }
  };
  for (bool first = true;; first = false) {
    {
      Tile t;
      if (!tiles.pop(t)) break;
      if (first) stamp(1);
      m.begin_tile(t, first);
      if (!waited) pdl_wait();
      if constexpr (kGatherA) m.prefetch_sa(0);
      if (first && p.trace != nullptr && threadIdx.x == 0) {
        ptx::mbar_wait(s_full + 8 * m.stage, m.phase);
        stamp(2);
      }
      const u32 kb0 = T::kSplitK > 1 ? t.kb_begin : 0u, kb1 = T::kSplitK > 1 ? t.kb_end : p.num_kb;
      const u32 stage0 = m.stage, phase0 = m.phase;
      if (ptx::warp_uniform(m.active)) {  // broadcast, or the stage addresses leave the uniform registers
        m.k_loop(out, kb0, kb1);
      } else {
#pragma unroll
        for (int i = 0; i < Fp8GemmMath<T, kGatherA>::kOut; ++i) out[i] = 0.0f;  // never stored
      }
      m.skip_stages(stage0, phase0, kb1 - kb0);
      if constexpr (T::kWgM == 2 && T::kCluster == 1) {
        if (!m.order_on) ptx::named_barrier_sync(1, T::kMathThreads);  // see skip_stages
      }
    }
    stamp(3);
    if (p.trace != nullptr && threadIdx.x == 0) {  // this tile's K loop end, and the tile count
      unsigned long long* row = p.trace + kGemmTraceSlots * blockIdx.x;
      const unsigned long long n = row[kGemmTraceSlotTiles];
      if (n < kGemmTraceTiles) row[kGemmTraceSlotTile0 + n] = row[3];
      row[kGemmTraceSlotTiles] = n + 1;
    }
    if constexpr (T::kSplitK > 1) {
      if (!split.reduce(out, threadIdx.x)) {  // a share handed to rank 0, which stores the tile
        tiles.release();
        continue;
      }
    }
    Tile t;
    tiles.peek(t);  // again, rather than keeping the fields live across the K loop
    Epilogue::store(out, t, p, s_d, tma_d, m.th);
    stamp(4);
    tiles.release();
  }
  if (!waited) pdl_wait();  // a CTA without tiles
  m.order_end();
  Epilogue::finish(m.th, p);
  stamp(5);
}

/// The gather variant's A loads (the MoE GEMM1 on token-major activations, GemmParams::a_gather):
/// the producer warpgroup's warps 2 and 3 (64 threads) copy each tile row's 128-byte K block from
/// its token's row with cp.async into the 128-byte swizzled stage, exactly where a TMA box would
/// put it; then one arrival per thread on the stage's `full` barrier once its copies have landed
/// (the math threads read the A scales from global memory). Thread g copies the 16-byte chunks
/// g % 4 and g % 4 + 4 of rows g / 4 + 16 j (four rows per thread keep the producer's 40 registers
/// spill-free; a warp instruction reads eight half rows). Rows past the tile's valid rows keep
/// stale bytes (their results are never stored), as with the 8-row TMA boxes; K past `k` is
/// zero-filled. (One one-row TMA box per row and K block instead measured GEMM1 +44% at T = 4096
/// against these copies, perf-notes v28.)
inline constexpr u32 kGatherThreads = 64;

template <class T>
struct GatherALoader {
  static constexpr u32 kRows = u32(T::kBlockM) / 16;  // rows per thread
  static constexpr u32 kNone = ~0u;
  static_assert(T::kBlockM == 64, "the gather variant runs 64-row tiles");

  __device__ __forceinline__ static void run(const GemmParams& p, u32 g, u32 s_a, u32 s_full, u32 s_empty,
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

/// The whole kernel: shared-memory carve-up, barrier setup, producer and math roles. The epilogue's
/// staging buffer (Epilogue::kSmemBytes, 1024-byte aligned) comes first. kGatherA: A comes from
/// GatherALoader instead of TMA, its scales from global memory (Fp8GemmMath).
template <class T, class Scheduler, class Epilogue, bool kGatherA = false>
__device__ __forceinline__ void fp8_gemm_mainloop(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                                  const ptx::TmaDescriptor& tma_sfa,
                                                  const ptx::TmaDescriptor& tma_d, const GemmParams& p) {
  constexpr int kStages = T::kStages;
  constexpr int kCluster = T::kCluster;
  static_assert(Epilogue::kSmemBytes % 1024 == 0, "the staging buffer keeps the stages 1024-byte aligned");
  // With split-K the staging buffer doubles as the partial sums' (rank 0 only stages, the others
  // only hand partials over).
  constexpr u32 kStaging = gemm_staging_bytes(Epilogue::kSmemBytes, T::kBlockM, T::kBlockN, T::kSplitK);
  static_assert(kStaging % 1024 == 0, "the split-K partials keep the stages 1024-byte aligned");

  if (p.trace != nullptr && threadIdx.x == 0) {
    p.trace[kGemmTraceSlots * blockIdx.x] = ptx::globaltimer();
    p.trace[kGemmTraceSlots * blockIdx.x + kGemmTraceSlotSm] = ptx::smid();
  }
  extern __shared__ ptx::u8 smem_raw[];
  const u32 raw = ptx::smem_addr(smem_raw);
  const u32 base = (raw + 1023u) & ~1023u;
  ptx::u8* smem = smem_raw + (base - raw);
  const u32 s_d = base;
  const u32 s_a = s_d + kStaging;
  const u32 s_b = s_a + kStages * T::kSmemA;
  const u32 s_sfa = s_b + kStages * T::kSmemB;
  const u32 s_full = s_sfa + kStages * T::kSmemSfa;
  const u32 s_empty = s_full + kStages * 8;
  const u32 s_tiles = s_empty + kStages * 8;
  const float* sfa_smem = reinterpret_cast<const float*>(smem + (s_sfa - base));
  TilePipe tiles{s_tiles};
  SplitKReduce<T> split{s_d, s_tiles + gemm_tile_pipe_bytes(), ptx::u32(T::kSplitK > 1 ? ptx::cluster_ctarank() : 0)};

  if (threadIdx.x == T::kMathThreads) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      // The load thread's arrival (+ TMA bytes), and with kGatherA one per gather thread.
      ptx::mbar_init(s_full + 8 * s, 1 + (kGatherA ? kGatherThreads : 0u));
      ptx::mbar_init(s_empty + 8 * s, kCluster * T::kMathThreads / 32);  // every math warp of the cluster
    }
    for (u32 s = 0; s < kGemmTileSlots; ++s) {
      ptx::mbar_init(tiles.full() + 8 * s, 1);
      // Every math thread + the load thread (+ the gather threads).
      ptx::mbar_init(tiles.empty() + 8 * s, T::kMathThreads + 1 + (kGatherA ? kGatherThreads : 0u));
    }
    if constexpr (T::kSplitK > 1) split.init();
    Scheduler::init_shared(s_tiles + gemm_pair_claims_offset());
    ptx::fence_mbar_init();
    ptx::tma_prefetch_descriptor(&tma_a);
    ptx::tma_prefetch_descriptor(&tma_b);
    ptx::tma_prefetch_descriptor(&tma_sfa);
    ptx::tma_prefetch_descriptor(&tma_d);
  }
  // Peers multicast into this CTA's stages and arrive on its barriers: all must be initialized.
  if constexpr (T::kClusterSize > 1) ptx::cluster_sync();
  else __syncthreads();

  if (threadIdx.x >= T::kMathThreads) {
    // ------------------------------------------------------------------ producer warpgroup
    ptx::setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x / 32 == T::kMathThreads / 32 + 1) {
      // Scheduler warp (warp 1): all lanes run the scheduler in step (it may search with warp
      // collectives), lane 0 publishes the tiles. Its own warp, so the search state never
      // competes with the load loop for the producer's 40 registers (spilled loop state measured
      // +10 µs on GEMM1 at T = 1: local-memory reads that miss L1 wait on a saturated memory
      // system), and it works ahead of the loads by up to the pipe's depth (a search of the group
      // offsets is a chain of dependent L2 reads).
      const bool publisher = ptx::lane_id() == 0;
      pdl_wait_at(p, false);
      Scheduler sched(p, s_tiles + gemm_pair_claims_offset());
      Tile t;
      bool more = sched.next(t);
      if (publisher) tiles.push(t, more);  // with pdl_early before the wait: the load thread may start B
      __syncwarp();
      pdl_wait_at(p, true);
      while (more) {
        more = sched.next(t);
        if (publisher) tiles.push(t, more);
        __syncwarp();
      }
    } else if (threadIdx.x == T::kMathThreads) {
      // Load thread (warp 0): takes the tiles from the pipe and issues their TMA loads.
      // A and its scales come from the previous kernel; B (weights) does not. With
      // GemmParams::b_before_wait the first tile's B stages are requested before the PDL wait, so
      // their DRAM latency (and, behind a long previous kernel, their streaming) overlaps it.
      bool waited = p.pdl == 0;
      if (!waited && !p.b_before_wait) {
        ptx::griddep_wait();
        waited = true;
      }
      u32 stage = 0, phase = 0;
#if MOEKIT_DIAG_NO_LOADS
      u32 diag_loaded = 0;
#endif
      // B's L2 policy where GemmParams::b_evict_first: weights that few tiles read go out of L2 first.
      const ptx::u64 b_policy = ptx::l2_policy_evict_first();
      const u32 a_box = p.a_box_rows ? p.a_box_rows : u32(T::kBlockM);
      const u32 rank = kCluster > 1 ? ptx::cluster_ctarank() : 0u;
      for (;;) {
        Tile t;
        const bool more = tiles.pop(t);
        tiles.release();
        if (!more) break;
        // A rows to load: the valid rows rounded up to whole boxes (a ghost tile loads none).
        const u32 a_need = (t.valid_rows + a_box - 1) / a_box * a_box;
        const u32 a_rows = a_need < u32(T::kBlockM) ? a_need : u32(T::kBlockM);
        // A-scale boxes: one per wave with valid rows (at least one, as a ghost tile's barrier
        // still expects bytes).
        const u32 sfa_boxes = T::kWaves > 1 && a_rows > 128u ? u32(T::kWaves) : 1u;
        const u32 tx = kGatherA ? T::kSmemB
                                : a_rows * kGemmBlockK + T::kSmemB + sfa_boxes * gemm_sfa_box(T::kBlockM) * 4u;
        const BTileWalk bw(p, t);
        auto load_b = [&](u32 st, u32 kb) {
          const u32 full = s_full + 8 * st;
          const int b_x = int(kb * bw.dx);
          const u32 b_y = bw.y0 + kb * bw.dy;
          if constexpr (kCluster > 1 && !T::kShareA) {
            if (t.solo) {
              // A tile of its own (GemmParams::pair_tail_split): every slice of B, into this CTA only.
              for (u32 r = 0; r < u32(kCluster); ++r)
                ptx::tma_load_2d(s_b + st * T::kSmemB + r * (T::kSmemB / kCluster), &tma_b, full, b_x,
                                 int(b_y + r * (T::kBlockN / kCluster)));
            } else {
              // This CTA's slice of the shared B tile, into the same stage of every CTA.
              ptx::tma_load_2d_multicast(s_b + st * T::kSmemB + rank * (T::kSmemB / kCluster), &tma_b, full, b_x,
                                         int(b_y + rank * (T::kBlockN / kCluster)), ptx::u16((1u << kCluster) - 1));
            }
          } else if (p.b_evict_first) {
            ptx::tma_load_2d_hint(s_b + st * T::kSmemB, &tma_b, full, b_x, int(b_y), b_policy);
          } else {
            // No hint at all: loads with an explicit evict-normal policy measured 5-24% slower on the
            // long dense and contiguous launches (perf-notes v32).
            ptx::tma_load_2d(s_b + st * T::kSmemB, &tma_b, full, b_x, int(b_y));
          }
        };
        auto load_a = [&](u32 st, u32 kb) {
          if constexpr (kGatherA) return;  // GatherALoader's
          const u32 full = s_full + 8 * st;
          for (u32 r = 0, box = 0; r < a_rows; r += a_box, ++box) {
            if constexpr (T::kShareA) {
              // Box i comes from rank i % kCluster, into the same stage of every CTA (a one-wave
              // tile's single box from rank 0).
              if (box % u32(kCluster) == rank)
                ptx::tma_load_2d_multicast(s_a + st * T::kSmemA + r * kGemmBlockK, &tma_a, full,
                                           int(kb * kGemmBlockK), int(t.m0 + r), ptx::u16((1u << kCluster) - 1));
            } else {
              ptx::tma_load_2d(s_a + st * T::kSmemA + r * kGemmBlockK, &tma_a, full, int(kb * kGemmBlockK),
                               int(t.m0 + r));
            }
          }
          for (u32 w = 0; w < sfa_boxes; ++w)
            ptx::tma_load_2d(s_sfa + st * T::kSmemSfa + w * gemm_sfa_wave_floats(T::kBlockM) * 4u, &tma_sfa, full,
                             int((t.m0 + w * 128u) & ~3u), int(kb));
        };
        u32 kb = T::kSplitK > 1 ? t.kb_begin : 0u;
        const u32 kb_end = T::kSplitK > 1 ? t.kb_end : p.num_kb;
        if (!waited) {
          // First tile, every stage still free: B of the first stages, the wait, then their A.
          const u32 pre = kb_end - kb < u32(kStages) ? kb_end - kb : u32(kStages);
          for (u32 i = 0; i < pre; ++i) {
            ptx::mbar_arrive_expect_tx(s_full + 8 * i, tx);
            load_b(i, kb + i);
          }
          ptx::griddep_wait();
          waited = true;
          for (u32 i = 0; i < pre; ++i) load_a(i, kb + i);
          kb += pre;
          stage = pre % u32(kStages);
          phase = pre == u32(kStages) ? 1u : 0u;
        }
        for (; kb < kb_end; ++kb) {
          ptx::mbar_wait(s_empty + 8 * stage, phase ^ 1u);
#if MOEKIT_DIAG_NO_LOADS
          if (++diag_loaded > u32(kStages)) {
            ptx::mbar_arrive(s_full + 8 * stage);  // diagnostic: the stage keeps its old contents
          } else
#endif
          {
            ptx::mbar_arrive_expect_tx(s_full + 8 * stage, tx);
            load_a(stage, kb);
            load_b(stage, kb);
          }
          if (++stage == kStages) {
            stage = 0;
            phase ^= 1u;
          }
        }
      }
    } else if constexpr (kGatherA) {
      if (threadIdx.x >= T::kMathThreads + 64)  // warps 2 and 3
        GatherALoader<T>::run(p, threadIdx.x - (T::kMathThreads + 64), s_a, s_full, s_empty, tiles);
    }
  } else {
    // ------------------------------------------------------------------ math warpgroups
    ptx::setmaxnreg_inc<T::kMathRegs>();
    fp8_gemm_math<T, Epilogue, kGatherA>(p, s_d, s_a, s_b, s_full, s_empty, sfa_smem, tma_d, tiles, split);
  }
  // No CTA may leave while a peer can still multicast into it, arrive on its barriers or read its
  // split-K partials.
  if constexpr (T::kClusterSize > 1) ptx::cluster_sync();
}

/// The dense GEMM: DenseScheduler + a bf16 epilogue (TMA store, or direct stores with
/// kDirectStore: GemmConfig::direct_store); with kSplitK > 1, clusters of kSplitK CTAs share each
/// tile's K blocks and rank 0 stores the sum (SplitKReduce).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kSplitK = 1, bool kDirectStore = false>
__device__ __forceinline__ void fp8_gemm_dense(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                               const ptx::TmaDescriptor& tma_sfa, const ptx::TmaDescriptor& tma_d,
                                               const GemmParams& p) {
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster, 1, 128, 128, kSplitK>;
  fp8_gemm_mainloop<T, DenseScheduler<kBlockM, kBlockN, kCluster, kSplitK>, Bf16Epilogue<T, kDirectStore>>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

/// Contiguous (flat, expert-sorted, 128-aligned segments) grouped GEMM (kDirectStore as the dense GEMM's).
template <int kBlockM, int kBlockN, int kStages, int kCluster, bool kDirectStore = false>
__device__ __forceinline__ void fp8_gemm_contiguous(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                                    const ptx::TmaDescriptor& tma_sfa,
                                                    const ptx::TmaDescriptor& tma_d, const GemmParams& p) {
  static_assert(kCluster == 1 || gemm_cluster_shares_a(kBlockM, kCluster),
                "grouped schedulers pair CTAs only along N (256-row tiles sharing A)");
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster>;
  fp8_gemm_mainloop<T, ContiguousScheduler<kBlockM, kBlockN, kCluster>, Bf16Epilogue<T, kDirectStore>>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

/// Masked ([E, max_m] with per-group counts) grouped GEMM (kDirectStore as the dense GEMM's).
template <int kBlockM, int kBlockN, int kStages, int kCluster, bool kDirectStore = false>
__device__ __forceinline__ void fp8_gemm_masked(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                                const ptx::TmaDescriptor& tma_sfa, const ptx::TmaDescriptor& tma_d,
                                                const GemmParams& p) {
  static_assert(kCluster == 1 || gemm_cluster_shares_a(kBlockM, kCluster),
                "grouped schedulers pair CTAs only along N (256-row tiles sharing A)");
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster>;
  fp8_gemm_mainloop<T, MaskedScheduler<kBlockM, kBlockN, kCluster>, Bf16Epilogue<T, kDirectStore>>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

}  // namespace moekit::sm90
