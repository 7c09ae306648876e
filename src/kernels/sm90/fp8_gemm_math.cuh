// The math warpgroups' K loop of the sm90 FP8 GEMM family: stage waits, wgmma issue, FP32
// promotion with the A and B scales (fp8_gemm_traits.cuh has the family's overview).
#pragma once
#include "kernels/sm90/fp8_gemm_traits.cuh"
#include "kernels/sm90/scheduler.cuh"
#include "ptx/wgmma_fp8.cuh"

namespace moekit::sm90 {

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
/// acquire-only form compiles to no instruction but measured 2.5% slower at T = 1024,
/// docs/performance.md §Gather vs permute); the A scales are read from the token-major scales in
/// global memory by each row's token, one K block ahead (their L2 latency exposed in every K block
/// measured +2 µs at T = 1 and +8% at T = 1024, docs/performance.md §Gather vs permute).
template <class T, class P, bool kGatherA = false>
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
  /// promoting at once. Measured (docs/performance.md §Issue order of stacked warpgroups): dense 128 x 128 tiles −3%, contiguous grouped
  /// −1.6…−4%; the MoE GEMM1's side-by-side warpgroups (kWgN = 2, chained serial schedule, B
  /// multicast pairs) +4% at T = 4096, so they keep no order, and neither does the chained schedule
  /// (measured only there). 256-row tiles take no turns per wave: turns measured 2.5% slower on the
  /// contiguous 4 x 8192 (4096, 7168) case and 2% on dense 4096x7168x16384; nor do the serial
  /// (wider than 128) tiles: 4096x2112x7168 m128n192 106.2 → 104.8 µs without, n160 123.5 → 124.3
  /// (docs/performance.md §Issue order of stacked warpgroups).
  static constexpr bool kOrdered = T::kWgM == 2 && T::kWgN == 1 && T::kSplit == 1 && T::kWaves == 1 && kPipelined;
  static constexpr u32 kOrderBar = 2;  // 1 is the epilogues'
  /// How the B scales (one per K block, read through L1 from rows of num_kb floats) reach the
  /// promotion without waiting on a miss — at a CTA's first tile the row's lines are cold in L2 too,
  /// and a new line starts every 32 K blocks. Measured per kernel (H100, docs/performance.md §B-scale reads):
  ///  * kSbAhead: each K block's scales are loaded one K block ahead (the first by begin_tile)
  ///    instead of after the stage's wait. The MoE GEMM1 (side-by-side warpgroups, kWgN = 2): prefill
  ///    stage −0.8%; the 256-row tiles +1.6…+2.5% (contiguous 4 x 8192 (4096, 7168)).
  ///  * kSbPrefetch: begin_tile prefetches the rows' lines into L1 — 0 none, 1 every line of every
  ///    tile, 2 every line of a CTA's first tile (whose loads leave time to spare) and all but the
  ///    first line of the later ones, 3 only the first tile's. Mode 2: DeepGEMM's masked rows −2…−3%,
  ///    dense 1024x4096x7168 −3%, contiguous −0.5%; on the MoE GEMM1 +0.6%. Mode 1 was slower on the
  ///    short-K tiles of long launches (+1…+1.5%): prefetching the line a K loop is about to read
  ///    costs more than the miss.
  static constexpr bool kSbAhead = T::kWgN == 2;
  static constexpr int kSbPrefetch = kSbAhead ? 0 : 2;

  const P& p;
  u32 s_a, s_b, s_full, s_empty;
  const float* sfa_smem;
  MathThread th;
  u32 r0;  // this thread's rows in its warpgroup's 64: r0 and r0 + 8
  u32 stage = 0, phase = 0;
  // Per tile:
  const float* sb_row0 = nullptr;
  const float* sb_row1 = nullptr;
  u32 num_former = 0;  // 8-column chunks that use the first B-scale block
  const float* sfa_thread = nullptr;  // this thread's first row (r0 + m0 % 4) in stage 0's A scales
  u32 tok0 = 0, tok1 = 0;  // kGatherA: the tokens of this thread's two rows (0 for rows without one)
  float pre_sa0 = 0.0f, pre_sa1 = 0.0f;  // kGatherA: their scales of the next K block
  float pre_sb0 = 0.0f, pre_sb1 = 0.0f;  // kSbAhead: the next K block's B scales
  u32 sb_staged = 0;  // T::kStageSb: shared address of the tile's staged B-scale rows (0: read sb_row0/1)
  // Warpgroups stacked along M (kWgM = 2) on a tile of at most 64 valid rows (a half tile,
  // the families' tail_halves, or a short group's tile): warpgroup 1 skips the tile's K loop
  // (`active` 0; its stage and phase advance by arithmetic), warpgroup 0 releases each stage for
  // both (`arrivals` 2), and the issue order pauses (`order_on` 0). A K loop of its own for the
  // idle warpgroup (waiting and releasing each stage) measured 4-9% slower on the dense M = 4096
  // shapes: ptxas then kept the stage addresses out of the uniform registers (docs/performance.md §Warp-uniform descriptors and the wgmma serialization guard).
  u32 active = 1, order_on = 1, arrivals = 1;
  u32 waves = 1;  // 256-row tiles: waves with valid rows (1 or 2; warp-uniform)
  u32 kb_rot = 0;  // MOEKIT_K_ROTATE: this tile's first K block

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

  /// first_tile: the CTA's first (its loads are still on their way: time to spare). staged: the
  /// tile slot's staged B scales (TilePipe::staged_sb), used when T::kStageSb and the rows fit.
  __device__ __forceinline__ void begin_tile(const Tile& t, bool first_tile, u32 staged) {
    // One B-scale block, or two when this warpgroup's columns straddle a block boundary. Read from
    // global memory through L1 (warp-uniform), as kSbAhead and kSbPrefetch say, unless staged.
    const float* sb = p.sb + t.sb_offset;
    const u32 n_wg = t.n0 + th.wn * u32(T::kWgCols);
    // (Clamped: the ghost tile of an A-sharing pair past N reads the last block's scales.)
    const u32 blk0 = min(n_wg / u32(T::kSbRows), p.num_n_sb - 1u);
    const u32 blk1 = (blk0 + 1 < p.num_n_sb) ? blk0 + 1 : blk0;
    sb_row0 = sb + blk0 * p.num_kb;
    sb_row1 = sb + blk1 * p.num_kb;
    if constexpr (kGemmKRotates<T, kGatherA>) kb_rot = gemm_k_rotation<T>(t.n0, t.m0, p.num_kb);
    num_former = T::kUniformSfb ? u32(T::kWgCols) / 8 : gemm_sb_first_block_chunks(n_wg, T::kWgCols, T::kSbRows);
    if constexpr (T::kStageSb) sb_staged = p.num_kb <= kGemmMaxStagedKb ? staged : 0u;
    if (kSbPrefetch != 0 && (kSbPrefetch != 3 || first_tile) && sb_staged == 0) {
      const bool skip_first = kSbPrefetch == 2 && !first_tile;
      prefetch_l1_lines(sb_row0, p.num_kb, skip_first);
      if (!T::kUniformSfb && blk1 != blk0) prefetch_l1_lines(sb_row1, p.num_kb, skip_first);
    }
    if constexpr (kSbAhead) {
      const u32 kb0 = T::kSplitK > 1 && t.kb_begin < p.num_kb ? t.kb_begin : kb_rot;
      pre_sb0 = __ldg(sb_row0 + kb0);
      pre_sb1 = T::kUniformSfb ? pre_sb0 : __ldg(sb_row1 + kb0);
    }
    sfa_thread = sfa_smem + (th.wm * 64 + r0 + (t.m0 & 3u));
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
  __device__ __forceinline__ KBlockScales wait_stage(u32 kb_step, bool ready = false) {
    KBlockScales s;
    constexpr bool kRotates = kGemmKRotates<T, kGatherA>;
    const u32 kb = kRotates ? gemm_rotated_kb(kb_step, kb_rot, p.num_kb) : kb_step;
    if constexpr (T::kStageSb) {
      if (sb_staged != 0) {  // staged by the scheduler warp before it published the tile: read before the wait
        s.sb0 = ptx::ld_shared_f32(sb_staged + kb * 4u);
        s.sb1 = T::kUniformSfb ? s.sb0 : ptx::ld_shared_f32(sb_staged + (kGemmMaxStagedKb + kb) * 4u);
      }
    }
    if constexpr (kSbAhead) {
      // Loaded one K block ago; the next K block's are requested before the wait.
      s.sb0 = pre_sb0;
      s.sb1 = pre_sb1;
      const u32 kn = kRotates ? gemm_rotated_kb(kb_step + 1 < p.num_kb ? kb_step + 1 : kb_step, kb_rot, p.num_kb)
                                     : (kb + 1 < p.num_kb ? kb + 1 : kb);
      pre_sb0 = __ldg(sb_row0 + kn);
      pre_sb1 = T::kUniformSfb ? pre_sb0 : __ldg(sb_row1 + kn);
    }
    if (!ready) ptx::mbar_wait(s_full + 8 * stage, phase);
    if constexpr (kGatherA) {
      ptx::fence_proxy_async_smem();
      s.sa0 = pre_sa0;
      s.sa1 = pre_sa1;
      if (kb_step + 1 < p.num_kb) prefetch_sa(kb_step + 1);
    } else {
      // One address per K block, the rows at fixed offsets from it (stages are padded past the box).
      const float* sfa = sfa_thread + stage * (T::kSmemSfa / 4);
      s.sa0 = sfa[0];
      s.sa1 = sfa[8];
      if constexpr (T::kWaves > 1) {  // (stale in a tile without wave 1, and then unused)
        s.sa2 = sfa[kSfaWave];
        s.sa3 = sfa[kSfaWave + 8];
      }
    }
    if constexpr (!kSbAhead) {
      if (!T::kStageSb || sb_staged == 0) {
        s.sb0 = __ldg(sb_row0 + kb);
        s.sb1 = T::kUniformSfb ? s.sb0 : __ldg(sb_row1 + kb);
      }
    }
    return s;
  }

  /// Issues part `part` of the current stage's four k=32 wgmmas (all four with one promotion per
  /// K block, else 4 / kSplit of them) into `acc`, overwriting it, and commits; `wave`: the rows
  /// of that wave (+128 each).
  __device__ __forceinline__ void issue(float (&acc)[kAcc], u32 part = 0, u32 wave = 0) {
    constexpr u32 kPerPart = kGemmBlockK / 32 / u32(T::kSplit);
    // (Wave 1's rows as an offset of the descriptor: one address per K block for both waves.)
    const ptx::u64 desc_a = ptx::smem_desc_k_sw128(s_a + stage * T::kSmemA + th.wm * 64 * kGemmBlockK) +
                            wave * ((128 * kGemmBlockK) >> 4);
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
      // Straddling tiles: chunks in groups of T::kSbChunkGroup share their scale (num_former is a
      // multiple of it), so the promotion picks one scale pair per group, not per chunk.
      const bool first =
          T::kUniformSfb || (T::kAlignedSfb ? i < u32(T::kSbRows) / 8
                                            : i / T::kSbChunkGroup < num_former / T::kSbChunkGroup);
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

  /// MOEKIT_KLOOP_EARLY_WAIT (an experiment awaiting its A/B, docs/peers.md §Static comparison):
  /// the serial schedules probe the next stage (mbarrier.test_wait: no blocking, no branch) right
  /// after releasing the current one, before the K block's last promotion, so that the probe's
  /// latency hides under the FFMAs, as ptxas places DeepGEMM's unrolled wait; the blocking wait,
  /// only if the probe failed, and the next stage's scales follow the promotion.
  static constexpr bool kEarlyWait = MOEKIT_KLOOP_EARLY_WAIT != 0;

  /// The serial schedules, once the K block's last wgmmas have completed: releases the stage, and
  /// under kEarlyWait moves to the next one and probes it (past the tile's end the probe is unused).
  __device__ __forceinline__ bool release_and_probe() {
    release(stage);
    if constexpr (!kEarlyWait) return false;
    advance();
    return ptx::mbar_test_wait(s_full + 8 * stage, phase);
  }
  /// The serial schedules, after K block kb's promotion: under kEarlyWait waits for the next K
  /// block's stage (unless probed `ready`) and reads its scales into `ahead`, else moves to it.
  __device__ __forceinline__ void next_stage(KBlockScales& ahead, u32 kb, u32 kb_end, bool ready) {
    if constexpr (kEarlyWait) {
      if (kb + 1 < kb_end) ahead = wait_stage(kb + 1, ready);
    } else {
      advance();
    }
  }

  /// Accumulates K blocks [kb_begin, kb_end) of the current tile into `out` (zeroed first). A
  /// split-K share is never empty through the API (split_k <= num_kb is required); an empty one
  /// would contribute zeros.
  /// The waves schedule over K blocks [kb_begin, kb_end) with kLive waves holding valid rows.
  template <int kLive>
  __device__ __forceinline__ void k_loop_waves(float (&out)[kOut], u32 kb_begin, u32 kb_end) {
    float acc[kAcc];
    KBlockScales ahead;  // kEarlyWait: the next K block's scales
    if constexpr (kEarlyWait) ahead = wait_stage(kb_begin);
    for (u32 kb = kb_begin; kb < kb_end; ++kb) {
      const KBlockScales sc = kEarlyWait ? ahead : wait_stage(kb);
      bool ready = false;
#pragma unroll
      for (int w = 0; w < kLive; ++w) {
        take_turn();
        issue(acc, 0, u32(w));
        pass_turn();
        ptx::wgmma_wait<0>();
        if (w == kLive - 1) ready = release_and_probe();
        if (w == 0) promote<0>(out, acc, sc);
        else promote<kLive - 1>(out, acc, sc);
      }
      next_stage(ahead, kb, kb_end, ready);
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
      // faster at prefill and 1-2% slower at T = 256...2048 (docs/performance.md §Tried and removed).
      float acc0[kAcc], acc1[kAcc];
      KBlockScales ahead;  // kEarlyWait: the next K block's scales
      if constexpr (kEarlyWait) ahead = wait_stage(kb_begin);
      for (u32 kb = kb_begin; kb < kb_end; ++kb) {
        const KBlockScales sc = kEarlyWait ? ahead : wait_stage(kb);
        bool ready = false;
        issue(acc0, 0);
#pragma unroll
        for (u32 part = 1; part < u32(T::kSplit); ++part) {
          issue(acc1, part);
          ptx::wgmma_wait<0>();
          // (kEarlyWait: the stage is released before the chains' sums are added)
          if (kEarlyWait && part == u32(T::kSplit) - 1) ready = release_and_probe();
#pragma unroll
          for (int i = 0; i < kAcc; ++i) {
            ptx::fence_operand(acc0[i]);
            ptx::fence_operand(acc1[i]);
            acc0[i] += acc1[i];
          }
        }
        if constexpr (!kEarlyWait) release(stage);
#if MOEKIT_DIAG_NO_PROMOTE
        if (kb + 1 == kb_end)
#endif
        promote(out, acc0, sc);
        next_stage(ahead, kb, kb_end, ready);
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
      KBlockScales ahead;  // kEarlyWait: the next K block's scales
      if constexpr (kEarlyWait) ahead = wait_stage(kb_begin);
      for (u32 kb = kb_begin; kb < kb_end; ++kb) {
        const KBlockScales sc = kEarlyWait ? ahead : wait_stage(kb);
        take_turn();
        issue(acc);
        pass_turn();
        ptx::wgmma_wait<0>();
        const bool ready = release_and_probe();
        promote(out, acc, sc);
        next_stage(ahead, kb, kb_end, ready);
      }
    }
  }
};

}  // namespace moekit::sm90
