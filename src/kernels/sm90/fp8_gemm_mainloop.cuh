// The whole sm90 FP8 GEMM kernel: shared-memory carve-up, barriers, the producer warpgroup's
// scheduler warp and load warp, and the math warpgroups' tile loop (fp8_gemm_traits.cuh has the
// family's overview). The family's entry headers plug a scheduler and an epilogue into it.
#pragma once
#include "kernels/sm90/fp8_gemm_loaders.cuh"
#include "kernels/sm90/fp8_gemm_math.cuh"
#include "kernels/sm90/mxfp4_loader.cuh"
#include "kernels/sm90/split_k.cuh"

namespace moekit::sm90 {

template <class T, class Epilogue, bool kGatherA, class P>
__device__ __forceinline__ void fp8_gemm_math(const P& p, u32 s_d, u32 s_a, u32 s_b, u32 s_full,
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
  Fp8GemmMath<T, P, kGatherA> m{p, s_a, s_b, s_full, s_empty, sfa_smem};
  // Broadcast, so that ptxas knows the warpgroup index is warp-uniform: the stage descriptors then
  // live in uniform registers instead of being rebuilt through R2UR for every wgmma (dense
  // 4096x7168x16384 -3.8%, docs/performance.md §Warp-uniform descriptors and the wgmma serialization guard).
  const u32 wg = ptx::warp_uniform(threadIdx.x / 128);
  m.th.warpgroup = wg;
  m.th.wm = wg % u32(T::kWgM);
  m.th.wn = wg / u32(T::kWgM);
  m.th.warp = (threadIdx.x % 128) / 32;
  m.th.lane = ptx::lane_id();
  m.r0 = m.th.warp * 16 + m.th.lane / 4;

  float out[Fp8GemmMath<T, P, kGatherA>::kOut];
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
      m.begin_tile(t, first, tiles.staged_sb(T::kSbStageFloats));
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
        for (int i = 0; i < Fp8GemmMath<T, P, kGatherA>::kOut; ++i) out[i] = 0.0f;  // never stored
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

/// The whole kernel: shared-memory carve-up, barrier setup, producer and math roles. The epilogue's
/// staging buffer (Epilogue::kSmemBytes, 1024-byte aligned) comes first. kGatherA: A comes from
/// GatherALoader instead of TMA, its scales from global memory (Fp8GemmMath).
template <class T, class Scheduler, class Epilogue, bool kGatherA = false, class P>
__device__ __forceinline__ void fp8_gemm_mainloop(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                                  const ptx::TmaDescriptor& tma_sfa,
                                                  const ptx::TmaDescriptor& tma_d, const P& p) {
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
  static_assert(!(T::kMxfp4 && kGatherA),
                "MXFP4 B (its expansion warpgroup) and the gathered A (the producer's warps 2 and 3) do not combine");
  // MXFP4 B: the raw ring after the core layout (fp8_gemm_layout.cuh gemm_mx_region_offset).
  const Mxfp4Ring mx = Mxfp4Ring::at<T>(
      base + gemm_mx_region_offset(gemm_smem_core_bytes(Epilogue::kSmemBytes, T::kBlockM, T::kBlockN, kStages,
                                                         T::kSplitK)));
  // Arrivals besides the load warp's: the gather threads' (A) or the expansion threads' (B).
  constexpr u32 kHelpers = kGatherA ? kGatherThreads : (T::kMxfp4 ? kMxfp4ExpandThreads : 0u);
  TilePipe tiles{s_tiles};
  SplitKReduce<T> split{s_d, s_tiles + gemm_tile_pipe_bytes(), ptx::u32(T::kSplitK > 1 ? ptx::cluster_ctarank() : 0)};

  if (threadIdx.x == T::kMathThreads) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      // The load warp's elected lane's arrival (+ TMA bytes; with MXFP4 B the A load thread's), and one per
      // gather or expansion thread.
      ptx::mbar_init(s_full + 8 * s, 1u + kHelpers);
      ptx::mbar_init(s_empty + 8 * s, kCluster * T::kMathThreads / 32);  // every math warp of the cluster
    }
    for (u32 s = 0; s < kGemmTileSlots; ++s) {
      ptx::mbar_init(tiles.full() + 8 * s, kGemmTilePublishers);
      // Every math thread + the load warp (with MXFP4 B: the raw and A load threads) + the gather or
      // expansion threads.
      ptx::mbar_init(tiles.empty() + 8 * s, T::kMathThreads + (T::kMxfp4 ? 2u : 32u) + kHelpers);
    }
    if constexpr (T::kMxfp4) {
      for (int r = 0; r < T::kMxStages; ++r) {
        ptx::mbar_init(mx.full + 8 * r, 1);
        ptx::mbar_init(mx.empty + 8 * r, kMxfp4ExpandThreads);
      }
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

  if (T::kMxfp4 && threadIdx.x >= T::kMathThreads + 128) {
    // ------------------------------------------------------------------ MXFP4 B: expansion warpgroup
    // (its own branch, so that ptxas gives its code kExpandRegs rather than the producer's count)
    if constexpr (T::kMxfp4) {
      ptx::setmaxnreg_dec<T::kExpandRegs>();
      Mxfp4BLoader<T>::expand_all(p, threadIdx.x - (T::kMathThreads + 128), smem, base, s_b, s_full, s_empty, mx,
                                  tiles);
    }
  } else if (threadIdx.x >= T::kMathThreads) {
    // ------------------------------------------------------------------ producer warpgroup
    ptx::setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x / 32 == T::kMathThreads / 32 + 1) {
      // Scheduler warp (warp 1): all lanes run the scheduler in step (it may search with warp
      // collectives) and publish the tiles (TilePipe::push). Its own warp, so the search state never
      // competes with the load loop for the producer's 40 registers (spilled loop state measured
      // +10 µs on GEMM1 at T = 1: local-memory reads that miss L1 wait on a saturated memory
      // system), and it works ahead of the loads by up to the pipe's depth (a search of the group
      // offsets is a chain of dependent L2 reads).
      pdl_wait_at(p, false);
      Scheduler sched(p, s_tiles + gemm_pair_claims_offset());
      Tile t;
      bool more = sched.next(t);
      tiles.push<T>(t, more, p);  // with pdl_early before the wait: the load warp may start B
      __syncwarp();
      pdl_wait_at(p, true);
      while (more) {
        more = sched.next(t);
        tiles.push<T>(t, more, p);
        __syncwarp();
      }
    } else if (T::kMxfp4 && threadIdx.x == T::kMathThreads) {
      if constexpr (T::kMxfp4) Mxfp4BLoader<T>::load_raw(p, mx, tma_b, tiles);
    } else if (T::kMxfp4 && threadIdx.x == T::kMathThreads + 1) {
      if constexpr (T::kMxfp4) Mxfp4BLoader<T>::load_a(p, s_a, s_sfa, s_full, s_empty, tma_a, tma_sfa, tiles);
    } else if (!T::kMxfp4 && threadIdx.x / 32 == T::kMathThreads / 32) {
      // Load warp (warp 0): takes the tiles from the pipe and issues their TMA loads from one lane.
      // The whole warp runs the loop on warp-uniform values (TilePipe::take_uniform), so each copy
      // is one instruction on uniform registers; from a single load thread every copy went through
      // a loop over the lanes' values (R2UR, ELECT, BRA.U.ANY), and 64-row tiles waited for their
      // stages (docs/performance.md §Load warp: 128x4096x7168 -9%).
      const bool leader = ptx::elect_one();
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
      const u32 a_box = ATileLoad<T>::box_rows(p);
      const u32 rank = kCluster > 1 ? ptx::cluster_ctarank() : 0u;
      for (Tile t; tiles.take_uniform(t);) {
        const ATileLoad<T> al(t, a_box);
        const u32 tx = kGatherA ? T::kSmemB : al.tx_bytes() + T::kSmemB;
        const BTileWalk bw(p, t);
        auto load_b = [&](u32 st, u32 kb) {
          const u32 full = s_full + 8 * st;
          const int b_x = int(kb * bw.dx);
          const u32 b_y = bw.y0 + kb * bw.dy;
          if constexpr (kCluster > 1 && !T::kShareA) {
            if (t.solo) {
              // A tile of its own (MoeGemm1Fields::pair_tail_split): every slice of B, into this CTA only.
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
            // long dense and contiguous launches (docs/performance.md §B evict-first).
            ptx::tma_load_2d(s_b + st * T::kSmemB, &tma_b, full, b_x, int(b_y));
          }
        };
        auto load_a = [&](u32 st, u32 kb) {
          if constexpr (!kGatherA) al.issue(st, kb, s_a, s_sfa, s_full + 8 * st, tma_a, tma_sfa, rank);  // else GatherALoader's
        };
        // (MOEKIT_K_ROTATE, an experiment: fp8_gemm_traits.cuh)
        const u32 kb_rot = kGemmKRotates<T, kGatherA> ? gemm_k_rotation<T>(t.n0, t.m0, p.num_kb) : 0u;
        auto rot = [&](u32 kb) { return kGemmKRotates<T, kGatherA> ? gemm_rotated_kb(kb, kb_rot, p.num_kb) : kb; };
        u32 kb = T::kSplitK > 1 ? t.kb_begin : 0u;
        const u32 kb_end = T::kSplitK > 1 ? t.kb_end : p.num_kb;
        if (!waited) {
          // First tile, every stage still free: B of the first stages, the wait, then their A.
          const u32 pre = kb_end - kb < u32(kStages) ? kb_end - kb : u32(kStages);
          if (leader) {
            for (u32 i = 0; i < pre; ++i) {
              ptx::mbar_arrive_expect_tx(s_full + 8 * i, tx);
              load_b(i, rot(kb + i));
            }
          }
          ptx::griddep_wait();
          waited = true;
          if (leader)
            for (u32 i = 0; i < pre; ++i) load_a(i, rot(kb + i));
          kb += pre;
          stage = pre % u32(kStages);
          phase = pre == u32(kStages) ? 1u : 0u;
        }
        for (; kb < kb_end; ++kb) {
          ptx::mbar_wait(s_empty + 8 * stage, phase ^ 1u);
#if MOEKIT_DIAG_NO_LOADS
          if (++diag_loaded > u32(kStages)) {
            if (leader) ptx::mbar_arrive(s_full + 8 * stage);  // diagnostic: the stage keeps its old contents
          } else
#endif
          if (leader) {
            ptx::mbar_arrive_expect_tx(s_full + 8 * stage, tx);
            load_a(stage, rot(kb));
            load_b(stage, rot(kb));
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

}  // namespace moekit::sm90
