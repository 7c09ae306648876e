// The MoE GEMMs on MXFP4 weights for decode-sized groups (docs/design.md §MXFP4 weights, the decode GEMMs):
// Dᵀ = W · Aᵀ with the weights as the tensor core's A operand and a tile's few tokens as B, so a
// wgmma covers 64 weight rows x N = 8, 16 or 32 tokens instead of 64 token rows (mostly padding) x
// BLOCK_N weight rows. The weights never leave their 4-bit form in shared memory: each math thread
// expands its A fragment straight from the raw sub-chunks into registers (mxfp4_fragment_word puts
// a thread's 8 codes of a row and k32 step in one word), so there is no expansion warpgroup, no
// E4M3 B stage and no hand-off between them; the promotion (one FP32 scale per 128 x 128 block
// and token) and the numbers are those of mxfp4_loader.cuh's path.
//
//   producer warpgroup  warp 0 lane 0: per K block, the raw weight sub-chunks and the tokens' A
//                       tile and scales (or, kGatherA, each token's row and scales), into raw
//                       slot and A stage i (mx_decode_load)
//                       warp 1: the scheduler (ContiguousScheduler with BLOCK_M = tokens per tile,
//                       or StreamKScheduler)
//   math warpgroups     warpgroup w of a K group owns the tile's weight rows [64 kMTiles w,
//                       64 kMTiles (w + 1)): per K block and 64-row MMA tile, issue four m64nNk32
//                       wgmmas on 4 x 4 fragment registers (one K group: expanding the next block's
//                       fragments meanwhile), then wait, release the slot and promote:
//                       out += acc · sb(block) · sa(token). Two K groups (kKGroups, 8-token tiles)
//                       take alternate K blocks; the second hands its sums to the first.
// Accumulators (per 64-row MMA tile, wgmma_fp8.cuh's layout transposed): out[i] is weight row
// 16 warp + lane/4 (+8 for i % 4 ≥ 2) and token 8 (i / 4) + 2 (lane % 4) + (i & 1).
#pragma once
#include "kernels/sm90/fp8_gemm_loaders.cuh"
#include "kernels/sm90/mxfp4_loader.cuh"
#include "kernels/sm90/scheduler_stream_k.cuh"
#include "ptx/wgmma_fp8_rs.cuh"

namespace moekit::sm90 {

#if defined(MOEKIT_DECODE_TRACE)
inline constexpr bool kDecodeTrace = true;
#else
inline constexpr bool kDecodeTrace = false;
#endif

/// Tile traits: kTok tokens x kRows weight rows; kStages A stages = kRawStages raw slots;
/// kPromoteK: K per tensor-core chain (as Fp8GemmTraits::kPromoteK); kSbRows: weight rows per B
/// scale (64: the prepared W1, 128: W2); kKGroups_: pairs of math warpgroups that share each
/// tile's K blocks (1 or 2, fp8_gemm_layout.cuh gemm_mx_decode_k_groups_supported). The names
/// ATileLoad, Mxfp4RawWalk, Mxfp4Ring and TilePipe read are those of Fp8GemmTraits.
template <int kTok_, int kRows_, int kStages_, int kRawStages_, int kPromoteK_, int kSbRows_, bool kStreamK_ = false,
          int kKGroups_ = 1, bool kGatherA_ = false>
struct MxDecodeTraits {
  static constexpr int kBlockM = kTok_;
  static constexpr int kBlockN = kRows_;
  static constexpr int kStages = kStages_;
  static constexpr int kMxStages = kRawStages_;
  static constexpr bool kMxfp4 = true;
  static constexpr int kCluster = 1;
  static constexpr int kWaves = 1;
  static constexpr bool kShareA = false;
  static constexpr u32 kSmemA = gemm_smem_a_bytes(kTok_);
  static constexpr u32 kSmemSfa = gemm_smem_sfa_bytes(kTok_);
  /// A K group's math threads: two warpgroups over the tile's rows, the threads an epilogue sees.
  static constexpr u32 kMathThreads = 256;
  /// K groups: group g runs the tile's K blocks kb_begin + g, + g + kKGroups, …; the first adds the
  /// others' sums (shared memory) and runs the epilogue. Four warps per scheduler instead of two
  /// keep more K blocks in flight per SM (H100, gpt-oss-120b layer at T = 1 48.1 -> 45.4 µs with
  /// GEMM1's tiles in two groups; docs/mxfp4.md §K groups).
  static constexpr int kKGroups = kKGroups_;
  static constexpr u32 kAllMathThreads = kMathThreads * u32(kKGroups_);
  /// A gathered by token (GEMM1 on the token-major activations, MoeGemm1Params::a_gather): per
  /// valid row a one-row A box from the token's row and a 16-byte copy of the 4 scales around its
  /// own (mx_decode_load); the math reads each token column's scale at 4 c + token % 4. Spares the
  /// permuted copy's kernel where the sort's launch quantizes the tokens (moe_plan.cpp).
  static constexpr bool kGatherA = kGatherA_;
  static constexpr int kMxRawRows = kRows_;  ///< weight rows per raw slot (single CTAs)
  /// setmaxnreg's split (one K group; with two, every thread keeps the launch's 96).
  static constexpr u32 kProducerRegs = 40;
  static constexpr u32 kMathRegs = 232;
  static constexpr int kMTiles = kRows_ / 128;  ///< 64-row MMA tiles per math warpgroup
  static constexpr int kAcc = kTok_ / 2;        ///< accumulators per MMA tile and thread
  static constexpr int kPromoteK = kPromoteK_;
  static constexpr int kStepsPerChain = kPromoteK_ / 32;
  static constexpr int kChains = 4 / kStepsPerChain;
  static constexpr int kSbRows = kSbRows_;
  /// Tiles in stream-K pieces (StreamKScheduler): each tile's K blocks [kb_begin, kb_end).
  static constexpr bool kStreamK = kStreamK_;
  /// The tile's B-scale rows are staged in its tile slot (TilePipe::push; K <= kGemmMaxStagedKb
  /// blocks, else read through L1): a scale read per K block that missed L1 at every tile's start
  /// stalled the K loop on L2 (ncu, deepseek-v3 T = 1 GEMM2: L1TEX waits 35% of the stalls).
  static constexpr bool kStageSb = true;
  static constexpr u32 kSbRowsStaged = u32(kRows_ / kSbRows_);
  static constexpr u32 kSbStageFloats = gemm_mx_decode_sb_floats(kRows_, kSbRows_);
  static_assert(gemm_mx_decode_supported(kTok_, kRows_), "8, 16 or 32 tokens x 128 or 256 weight rows");
  static_assert(kStages_ >= 2 && kRawStages_ >= 2 && kRawStages_ <= 16, "2+ A stages, 2 … 16 raw slots");
  static_assert(kPromoteK_ == 128 || kPromoteK_ == 64 || kPromoteK_ == 32, "chains of 128, 64 or 32 of K");
  static_assert(kSbRows_ == 64 || kSbRows_ == 128, "B-scale blocks of 64 or 128 rows");
  static_assert(gemm_mx_decode_k_groups_supported(kTok_, kKGroups_), "two K groups on 8-token tiles only");
  // Two groups alternate along the ring: an even ring keeps each slot with one group inside a tile,
  // so a group never tests a slot's barrier while the other group's copy into it may be in flight
  // (the barrier would be a phase behind and its parity test pass early).
  static_assert(kKGroups_ == 1 || kStages_ % 2 == 0, "two K groups need an even ring");
  static_assert(!kGatherA_ || (kTok_ == 8 && gemm_smem_sfa_bytes(kTok_) >= 8u * 16u),
                "gathered A on 8-token tiles: a 16-byte A-scale box per row");
  static_assert(kKGroups_ > 1 || 2 * kMathRegs + kProducerRegs <= 512u, "64 K registers per SM");
  static_assert(gemm_mx_raw_bytes(kRows_) % 256 == 0, "the expansion tables after the raw slots stay 256-byte aligned");
};

/// One math thread's view of the raw sub-chunks: its two weight rows (r and r + 8 of each MMA
/// tile) sit in sub-chunk 2 t + warp / 2 of MMA tile t, at row rr and rr + 8 there.
struct MxFragmentRows {
  u32 rr;      ///< row in the sub-chunk: 16 (warp % 2) + lane / 4
  u32 sub;     ///< sub-chunk within the MMA tile: warp / 2
  u32 q;       ///< lane % 4: the fragment's columns 4q … and 16 + 4q …
  u32 unit;    ///< mxfp4_row_unit(rr, 0) (rr + 8 shares it)
  __device__ __forceinline__ MxFragmentRows(u32 warp, u32 lane)
      : rr(16u * (warp % 2u) + lane / 4u), sub(warp / 2u), q(lane % 4u), unit(mxfp4_row_unit(rr, 0)) {}
};

/// Expands MMA tile `sub_chunk`'s fragment for one K block: a[s] = the four registers of k32 step s.
/// `tables`: the expansion tables' shared address, 256-byte aligned, so a table's address is its
/// offset byte (the prepared weights' byte, a multiple of 8 below kMxfp4TableSlots * 8) in place of
/// the address's low byte: one byte permutation per lookup.
__device__ __forceinline__ void mx_expand_fragment(const ptx::u8* sub_chunk, u32 tables, const MxFragmentRows& f,
                                                   u32 (&a)[4][4]) {
  const u32 idx0 = *reinterpret_cast<const u32*>(sub_chunk + kMxfp4CodeBytes + f.rr * 4u);
  const u32 idx1 = *reinterpret_cast<const u32*>(sub_chunk + kMxfp4CodeBytes + (f.rr + 8u) * 4u);
  const ptx::u8* row0 = sub_chunk + f.rr * 64u + f.q * 4u;
  const ptx::u8* row1 = row0 + 8u * 64u;
  u32 w0[4], w1[4];
  uint2 t0[4], t1[4];
#pragma unroll
  for (u32 s = 0; s < 4; ++s) {  // loads first, so their latencies overlap
    w0[s] = *reinterpret_cast<const u32*>(row0 + ((s ^ f.unit) << 4));
    w1[s] = *reinterpret_cast<const u32*>(row1 + ((s ^ f.unit) << 4));
    ptx::ld_shared_const_v2(__byte_perm(idx0, tables, 0x7650u | s), t0[s].x, t0[s].y);
    ptx::ld_shared_const_v2(__byte_perm(idx1, tables, 0x7650u | s), t1[s].x, t1[s].y);
  }
#pragma unroll
  for (u32 s = 0; s < 4; ++s) {
    mxfp4_expand8(w0[s], Mxfp4Table{t0[s].x, t0[s].y}, a[s][0], a[s][2]);
    mxfp4_expand8(w1[s], Mxfp4Table{t1[s].x, t1[s].y}, a[s][1], a[s][3]);
  }
}

/// The load thread: per K block, the raw slot and the A stage of the same index (kStages ==
/// kMxStages; the math frees both together), so the tokens' A arrives with its weights. With A
/// stages of their own, issued after the raw loads run ahead, each A load waited behind the whole
/// raw ring's bytes (ncu, deepseek-v3 T = 1 GEMM2: the math warps' top stall, 20% of the samples,
/// on the A stage's barrier). Under PDL the first tile's first raw slots go out before the wait
/// (weights), their A after it.
template <class T, class P>
__device__ __forceinline__ void mx_decode_load(const P& p, const Mxfp4Ring& mx, u32 s_a, u32 s_sfa, u32 s_full,
                                               u32 s_empty, const ptx::TmaDescriptor& tma_a,
                                               const ptx::TmaDescriptor& tma_b, const ptx::TmaDescriptor& tma_sfa,
                                               TilePipe& tiles) {
  static_assert(T::kStages == T::kMxStages, "one ring: a raw slot and an A stage per K block");
  constexpr u32 kRawBytes = gemm_mx_raw_bytes(T::kBlockN);
  constexpr u32 kPreWaitSlots = 2;
  const ptx::u64 policy = ptx::l2_policy_evict_first();
  const u32 a_box = ATileLoad<T>::box_rows(p);
  bool waited = p.pdl == 0;
  u32 slot = 0, phase = 0;
  for (Tile t; tiles.take(t);) {
    const u32 kb0 = T::kStreamK ? t.kb_begin : 0u, kb1 = T::kStreamK ? t.kb_end : p.num_kb;
    // Gathered A: the tile's tokens (row_map comes from the previous kernel: after the PDL wait).
    u32 token[T::kGatherA ? 8 : 1] = {};
    auto load_tokens = [&] {
      if constexpr (T::kGatherA) {
#pragma unroll
        for (u32 r = 0; r < 8; ++r)
          token[r] = r < t.valid_rows ? u32(max(ptx::ld_chain(p.row_map + t.m0 + r), 0)) / p.top_k : 0u;
      }
    };
    if (waited) load_tokens();
    Mxfp4RawWalk w{};
    w.init(p, t, u32(T::kBlockN));
    const ATileLoad<T> al(t, a_box);
    auto load_raw = [&](u32 s, u32 kb) {
      const u32 full = mx.full + 8 * s;
      ptx::mbar_arrive_expect_tx(full, kRawBytes);
      const u32 dst = mx.raw + s * kRawBytes, y = w.y0 + kb * w.dy;
      for (u32 i = 0; i < w.boxes; ++i) {
        if (p.b_evict_first)
          ptx::tma_load_2d_hint(dst + i * w.box_rows * kMxfp4TmaRowBytes, &tma_b, full, 0, int(y + i * w.dbox), policy);
        else
          ptx::tma_load_2d(dst + i * w.box_rows * kMxfp4TmaRowBytes, &tma_b, full, 0, int(y + i * w.dbox));
      }
    };
    auto load_a = [&](u32 s, u32 kb) {
      if constexpr (T::kGatherA) {
        const u32 full = s_full + 8 * s, rows = min(t.valid_rows, 8u);
        ptx::mbar_arrive_expect_tx(full, rows * (kGemmBlockK + 16u));
#pragma unroll
        for (u32 r = 0; r < 8; ++r) {
          if (r < rows) {
            ptx::tma_load_2d(s_a + s * T::kSmemA + r * kGemmBlockK, &tma_a, full, int(kb * kGemmBlockK), int(token[r]));
            // (A bulk copy, not a tensor one: those need 128-byte aligned shared addresses.)
            ptx::bulk_load(s_sfa + s * T::kSmemSfa + r * 16u,
                           p.sa_gather + static_cast<unsigned long long>(kb) * p.sa_gather_ld + (token[r] & ~3u), 16u,
                           full);
          }
        }
      } else {
        ptx::mbar_arrive_expect_tx(s_full + 8 * s, al.tx_bytes());
        al.issue(s, kb, s_a, s_sfa, s_full + 8 * s, tma_a, tma_sfa, 0u);
      }
    };
    u32 kb = kb0;
    if (!waited) {  // the first tile: every slot still free
      // Only the first slots' weights before the wait: the A loads queue behind whatever raw bytes
      // precede them, and with the whole ring's weights ahead the first A tiles arrived that much
      // later (measured, H100: gpt-oss-120b T = 1 GEMM1 31.4 -> 26.4 us, together with A first).
      const u32 pre = kb1 - kb0 < kPreWaitSlots ? kb1 - kb0 : kPreWaitSlots;
      for (u32 i = 0; i < pre; ++i) load_raw(i, kb0 + i);
      ptx::griddep_wait();
      waited = true;
      load_tokens();
      for (u32 i = 0; i < pre; ++i) load_a(i, kb0 + i);
      kb = kb0 + pre;
      slot = pre % u32(T::kStages);
      phase = pre == u32(T::kStages) ? 1u : 0u;
    }
    for (; kb < kb1; ++kb) {
      ptx::mbar_wait(mx.empty + 8 * slot, phase ^ 1u);
      ptx::mbar_wait(s_empty + 8 * slot, phase ^ 1u);
      load_a(slot, kb);  // the small A first: it waits behind no weights of its own slot
      load_raw(slot, kb);
      if (++slot == u32(T::kStages)) {
        slot = 0;
        phase ^= 1u;
      }
    }
  }
  if (!waited) ptx::griddep_wait();  // no tiles
}

/// A position in the ring of raw slots and A stages: slot and its barriers' phase.
template <int kStages>
struct MxRingPos {
  u32 slot = 0, phase = 0;
  __device__ __forceinline__ void advance(u32 n) {  // n <= kStages
    slot += n;
    if (slot >= u32(kStages)) {
      slot -= u32(kStages);
      phase ^= 1u;
    }
  }
  __device__ __forceinline__ void advance_many(u32 n) {
    const u32 s = slot + n;
    phase ^= (s / u32(kStages)) & 1u;
    slot = s % u32(kStages);
  }
};

/// The named barrier of the K groups' hand-over (T::kKGroups == 2; 1 is the epilogues'): both groups
/// sync on it once per tile, the second after storing its sums into the tile's exchange buffer,
/// the first before reading them. Tiles alternate between two buffers, so a store for tile t + 2
/// follows, across tile t + 1's sync, the reads of tile t. (A bar.arrive / bar.sync pair with one
/// buffer, as ordered, drew compute-sanitizer racecheck hazards on every exchange.)
inline constexpr u32 kMxXchBarrier = 2;

/// The math warpgroups: consume raw slots and A stages, MMA, promote, run the epilogue per tile.
/// `s_xch`: the K groups' exchange (T::kKGroups > 1).
template <class T, class Epilogue, class P>
__device__ __forceinline__ void mx_decode_math(const P& p, u32 base, ptx::u8* smem, u32 s_d, u32 s_a, u32 s_full,
                                               u32 s_empty, const float* sfa_smem, const Mxfp4Ring& mx,
                                               const ptx::TmaDescriptor& tma_d, TilePipe& tiles, u32 s_xch) {
  using Mma = ptx::WgmmaE4M3Rs<T::kBlockM>;
  constexpr int kAcc = T::kAcc;
  constexpr u32 kGroups = u32(T::kKGroups);
  const u32 group = kGroups > 1 ? ptx::warp_uniform(threadIdx.x / T::kMathThreads) : 0u;
  const u32 gtid = threadIdx.x % T::kMathThreads;  // the thread within its K group
  MathThread th;
  th.warpgroup = ptx::warp_uniform(gtid / 128);
  th.wm = 0;
  th.wn = th.warpgroup;
  th.warp = (threadIdx.x % 128) / 32;
  th.lane = ptx::lane_id();
  const MxFragmentRows f(th.warp, th.lane);
  if (threadIdx.x < kMxfp4TableSlots) mxfp4_store_table(mx.table, threadIdx.x);
  ptx::named_barrier_sync(1, T::kAllMathThreads);
  // PDL: the epilogues write what the previous kernel may still read (and GEMM2 adds into y_acc).
  if (p.pdl) {
    ptx::griddep_wait();
    if (threadIdx.x == 0) ptx::griddep_launch_dependents();
  }
  constexpr u32 kRawBytes = gemm_mx_raw_bytes(T::kBlockN);
  constexpr u32 kSfaFloats = T::kSmemSfa / 4u;
  // Diagnostics (GemmParams::trace, fp8_gemm_mainloop.cuh's slots), compiled in only with
  // MOEKIT_DECODE_TRACE defined (MOEKIT_JIT_DEFINES, docs/environment.md): timestamps of the first
  // math thread straight to global memory. (Always compiled, their checks cost the two-group GEMM1
  // 24 bytes of spills at its 96 registers.)
  auto stamp = [&](u32 slot) {
    if (kDecodeTrace && p.trace != nullptr && threadIdx.x == 0) {
      p.trace[kGemmTraceSlots * blockIdx.x + slot] = ptx::globaltimer();
      if (slot == 2 || slot == 3)
        p.trace[kGemmTraceSlots * blockIdx.x + kGemmTraceSlotClock + slot - 2] = ptx::clock64();
    }
  };
  MxRingPos<T::kStages> tile_pos;  // the ring position of the next tile's first K block
  u32 xch_buf = 0;                  // the K groups' exchange buffer of this tile
  for (bool first = true;; first = false) {
    Tile t;
    if (!tiles.pop(t)) break;
    if (first) stamp(1);
    const u32 kb0 = T::kStreamK ? t.kb_begin : 0u, kb1 = T::kStreamK ? t.kb_end : p.num_kb;
    MxRingPos<T::kStages> pos = tile_pos;  // this group's next K block kb0 + group + kGroups i
    pos.advance(group);
    tile_pos.advance_many(kb1 - kb0);
    // This warpgroup's B-scale rows: staged (row (64 mt) / kSbRows of the tile's) or in global memory.
    const bool staged = p.num_kb <= kGemmMaxStagedKb;
    const u32 sb_smem = tiles.staged_sb(T::kSbStageFloats);
    const float* sb_row[T::kMTiles];
    u32 sb_staged[T::kMTiles];
#pragma unroll
    for (int j = 0; j < T::kMTiles; ++j) {
      const u32 off = 64u * (th.warpgroup * T::kMTiles + j);
      const u32 blk = min((t.n0 + off) / u32(T::kSbRows), p.num_n_sb - 1u);
      sb_row[j] = p.sb + t.sb_offset + blk * p.num_kb;
      sb_staged[j] = sb_smem + off / u32(T::kSbRows) * kGemmMaxStagedKb * 4u;
    }
    // This thread's token columns' A scales in a stage: c = 8 (i / 2) + 2q + (i & 1) at m0 % 4 + c,
    // or gathered at 4 c + token % 4 (sa_at, per tile).
    const u32 sfa0 = t.m0 % 4u + 2u * f.q;
    u32 sa_at[T::kGatherA ? kAcc / 2 : 1] = {};
    if constexpr (T::kGatherA) {
#pragma unroll
      for (int i = 0; i < kAcc / 2; ++i) {
        const u32 c = 8u * u32(i / 2) + 2u * f.q + u32(i & 1);
        const u32 token = c < t.valid_rows ? u32(max(ptx::ld_chain(p.row_map + t.m0 + c), 0)) / p.top_k : 0u;
        sa_at[i] = 4u * c + token % 4u;
      }
    }
    auto scale_at = [&](int i) {
      if constexpr (T::kGatherA) return sa_at[i];
      else return sfa0 + 8u * u32(i / 2) + u32(i & 1);
    };
    float out[T::kMTiles][kAcc];
    float acc[T::kMTiles][T::kChains][kAcc];
#pragma unroll
    for (int j = 0; j < T::kMTiles; ++j)
#pragma unroll
      for (int i = 0; i < kAcc; ++i) {
        out[j][i] = 0.0f;
#pragma unroll
        for (int c = 0; c < T::kChains; ++c) acc[j][c][i] = 0.0f;
      }
    // One K group: software-pipelined over K blocks, a K block's fragments are expanded (its slot
    // waited for) while the previous block's MMAs run, then that block is waited for, released and
    // promoted; two fragment sets, a0 / a1, alternate (the MMAs read their registers until the
    // wait). Two K groups: one set (the launch's 640 threads leave 96 registers each, and the
    // other group's warps fill the MMA's latency).
    constexpr bool kPipelined = kGroups == 1;
    u32 a0[T::kMTiles][4][4], a1[kPipelined ? T::kMTiles : 1][4][4];
    auto expand_block = [&](const MxRingPos<T::kStages>& at, u32 (&a)[T::kMTiles][4][4]) {
      ptx::mbar_wait(mx.full + 8 * at.slot, at.phase);
      ptx::mbar_wait(s_full + 8 * at.slot, at.phase);
      const ptx::u8* raw = smem + (mx.raw + at.slot * kRawBytes - base);
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j)
        mx_expand_fragment(raw + (2u * (th.warpgroup * T::kMTiles + j) + f.sub) * kMxfp4SubBytes, mx.table, f, a[j]);
    };
    // K block kb at `pos`, its fragments in `cur`; the group's next block's go to `nxt`.
    auto step = [&](u32 kb, u32 (&cur)[T::kMTiles][4][4], auto& nxt) {
      const u32 slot = pos.slot;
      const ptx::u64 desc = ptx::smem_desc_k_sw128(s_a + slot * T::kSmemA);
      ptx::wgmma_fence();
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j) {
#pragma unroll
        for (u32 s = 0; s < 4; ++s)
          Mma::mma(cur[j][s], desc + 2u * s, acc[j][s / T::kStepsPerChain], s % T::kStepsPerChain != 0 ? 1u : 0u);
      }
      ptx::wgmma_commit();
      pos.advance(kGroups);
      if constexpr (kPipelined) {
        if (kb + kGroups < kb1) expand_block(pos, nxt);
      }
      // The A scales and B scales of this K block, while the MMAs run.
      const float* sa = sfa_smem + slot * kSfaFloats;
      float sav[kAcc / 2];
#pragma unroll
      for (int i = 0; i < kAcc / 2; ++i) sav[i] = sa[scale_at(i)];
      float sbv[T::kMTiles];
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j)
        sbv[j] = staged ? ptx::ld_shared_f32(sb_staged[j] + kb * 4u) : __ldg(sb_row[j] + kb);
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j) {
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
          for (int r = 0; r < 4; ++r) ptx::fence_operand(cur[j][s][r]);
#pragma unroll
        for (int c = 0; c < T::kChains; ++c)
#pragma unroll
          for (int i = 0; i < kAcc; ++i) ptx::fence_operand(acc[j][c][i]);
      }
      __syncwarp();
      if (th.lane == 0) {
        ptx::mbar_arrive(mx.empty + 8 * slot);
        ptx::mbar_arrive(s_empty + 8 * slot);
      }
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j)
#pragma unroll
        for (int i = 0; i < kAcc; ++i) {
          float sum = acc[j][0][i];
#pragma unroll
          for (int c = 1; c < T::kChains; ++c) sum += acc[j][c][i];
          // Token 8 (i / 4) + 2q + (i & 1): its scale is sav[2 (i / 4) + (i & 1)].
          out[j][i] = fmaf(sum, sbv[j] * sav[2 * (i / 4) + (i & 1)], out[j][i]);
        }
    };
    const u32 kb_first = kb0 + group;
    if (kDecodeTrace && first && p.trace != nullptr && threadIdx.x == 0 && kb_first < kb1) {
      ptx::mbar_wait(mx.full + 8 * pos.slot, pos.phase);
      stamp(2);
    }
    if constexpr (kPipelined) {
      if (kb_first < kb1) expand_block(pos, a0);
      for (u32 kb = kb_first; kb < kb1; kb += 2u) {
        step(kb, a0, a1);
        if (kb + 1u < kb1) step(kb + 1u, a1, a0);
      }
    } else {
      for (u32 kb = kb_first; kb < kb1; kb += kGroups) {
        expand_block(pos, a0);
        step(kb, a0, a1);
      }
    }
    stamp(3);
    if (kDecodeTrace && p.trace != nullptr && threadIdx.x == 0) {  // this tile's K loop end, and the tile count
      unsigned long long* row = p.trace + kGemmTraceSlots * blockIdx.x;
      const unsigned long long n = row[kGemmTraceSlotTiles];
      if (n < kGemmTraceTiles) row[kGemmTraceSlotTile0 + n] = row[3];
      row[kGemmTraceSlotTiles] = n + 1;
    }
    if constexpr (kGroups > 1) {
      // The second group's sums to the first, thread for thread ([value][thread]: no bank conflicts).
      constexpr u32 kValues = u32(T::kMTiles * kAcc);
      static_assert(2u * kValues * T::kMathThreads * 4u == gemm_mx_decode_xch_bytes(T::kBlockM, T::kBlockN, kGroups),
                    "the exchange holds one K group's sums twice");
      const u32 xch = s_xch + xch_buf * kValues * T::kMathThreads * 4u + gtid * 4u;
      xch_buf ^= 1u;
      if (group != 0) {
#pragma unroll
        for (int j = 0; j < T::kMTiles; ++j)
#pragma unroll
          for (int i = 0; i < kAcc; ++i) ptx::st_shared_f32(xch + (u32(j * kAcc + i) * T::kMathThreads) * 4u, out[j][i]);
        ptx::named_barrier_sync(kMxXchBarrier, T::kAllMathThreads);
        tiles.release();
        continue;
      }
      ptx::named_barrier_sync(kMxXchBarrier, T::kAllMathThreads);
#pragma unroll
      for (int j = 0; j < T::kMTiles; ++j)
#pragma unroll
        for (int i = 0; i < kAcc; ++i) out[j][i] += ptx::ld_shared_f32(xch + (u32(j * kAcc + i) * T::kMathThreads) * 4u);
    }
    if constexpr (T::kStreamK && Epilogue::kWholeSum) {
      // A piece that continues a tile hands its sums to the tile's owner; the owner adds its helpers'.
      const StreamKPartials<T::kMathThreads, T::kMTiles, kAcc> sk{p.sk_partials, p.sk_flags};
      if (t.kb_begin != 0) {
        sk.publish(out, blockIdx.x, threadIdx.x, 1);
        tiles.release();
        continue;
      }
      if (t.fixups != 0) sk.gather(out, blockIdx.x + 1, t.fixups, threadIdx.x, 1);
    }
    Epilogue::store(out, t, p, s_d, tma_d, th);
    stamp(4);
    tiles.release();
  }
  if (group == 0) Epilogue::finish(th, p);
  stamp(5);
}

/// The whole kernel: shared-memory carve-up (fp8_gemm_layout.cuh gemm_mx_decode_smem_bytes),
/// barriers, the producer's roles and the math warpgroups.
template <class T, class Scheduler, class Epilogue, class P>
__device__ __forceinline__ void mx_decode_gemm(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                               const ptx::TmaDescriptor& tma_sfa, const ptx::TmaDescriptor& tma_d,
                                               const P& p) {
  static_assert(Epilogue::kSmemBytes % 1024 == 0, "the staging buffer keeps the A stages 1024-byte aligned");
  constexpr int kStages = T::kStages;
  if (kDecodeTrace && p.trace != nullptr && threadIdx.x == 0) {
    p.trace[kGemmTraceSlots * blockIdx.x] = ptx::globaltimer();
    p.trace[kGemmTraceSlots * blockIdx.x + kGemmTraceSlotSm] = ptx::smid();
  }
  extern __shared__ ptx::u8 smem_raw[];
  const u32 raw = ptx::smem_addr(smem_raw);
  const u32 base = (raw + 1023u) & ~1023u;
  ptx::u8* smem = smem_raw + (base - raw);
  const u32 s_d = base;
  const u32 s_a = s_d + Epilogue::kSmemBytes;
  const u32 s_sfa = s_a + kStages * T::kSmemA;
  const u32 s_full = s_sfa + kStages * T::kSmemSfa;
  const u32 s_empty = s_full + kStages * 8;
  const u32 s_tiles = s_empty + kStages * 8;
  const float* sfa_smem = reinterpret_cast<const float*>(smem + (s_sfa - base));
  const Mxfp4Ring mx = Mxfp4Ring::at<T>(base + gemm_mx_region_offset(gemm_mx_decode_core_bytes(
                                                    Epilogue::kSmemBytes, T::kBlockM, T::kBlockN, T::kSbRows, kStages,
                                                    T::kKGroups)));
  // The K groups' exchange: after the one-group core (fp8_gemm_layout.cuh gemm_mx_decode_xch_bytes).
  const u32 s_xch =
      base + gemm_mx_decode_core_bytes(Epilogue::kSmemBytes, T::kBlockM, T::kBlockN, T::kSbRows, kStages, 1);
  TilePipe tiles{s_tiles};
  constexpr u32 kMathWarps = T::kMathThreads / 32;  // a K block's consumers: one K group
  constexpr u32 kProducer = T::kAllMathThreads;     // the producer warpgroup's first thread

  if (threadIdx.x == kProducer) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(s_full + 8 * s, 1);  // the A load thread's arrival + its TMA bytes
      ptx::mbar_init(s_empty + 8 * s, kMathWarps);
    }
    for (u32 s = 0; s < kGemmTileSlots; ++s) {
      ptx::mbar_init(tiles.full() + 8 * s, kGemmTilePublishers);
      ptx::mbar_init(tiles.empty() + 8 * s, T::kAllMathThreads + 1);  // math threads + the load thread
    }
    for (int r = 0; r < T::kMxStages; ++r) {
      ptx::mbar_init(mx.full + 8 * r, 1);
      ptx::mbar_init(mx.empty + 8 * r, kMathWarps);
    }
    Scheduler::init_shared(s_tiles + gemm_pair_claims_offset());
    ptx::fence_mbar_init();
    ptx::tma_prefetch_descriptor(&tma_a);
    ptx::tma_prefetch_descriptor(&tma_b);
    ptx::tma_prefetch_descriptor(&tma_sfa);
    ptx::tma_prefetch_descriptor(&tma_d);
  }
  __syncthreads();

  if (threadIdx.x >= kProducer) {
    if constexpr (T::kKGroups == 1) ptx::setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x / 32 == kProducer / 32 + 1) {  // the scheduler warp (fp8_gemm_mainloop.cuh's)
      pdl_wait_at(p, false);
      Scheduler sched(p, s_tiles + gemm_pair_claims_offset());
      Tile t;
      bool more = sched.next(t);
      tiles.push<T>(t, more, p);
      __syncwarp();
      pdl_wait_at(p, true);
      while (more) {
        more = sched.next(t);
        tiles.push<T>(t, more, p);
        __syncwarp();
      }
    } else if (threadIdx.x == kProducer) {
      mx_decode_load<T>(p, mx, s_a, s_sfa, s_full, s_empty, tma_a, tma_b, tma_sfa, tiles);
    }
  } else {
    if constexpr (T::kKGroups == 1) ptx::setmaxnreg_inc<T::kMathRegs>();
    mx_decode_math<T, Epilogue>(p, base, smem, s_d, s_a, s_full, s_empty, sfa_smem, mx, tma_d, tiles, s_xch);
  }
}

}  // namespace moekit::sm90
