// BF16 output epilogues of the sm90 GEMM family (GemmConfig::direct_store picks one):
//  * Bf16TmaEpilogue: FP32 accumulators → bf16 → shared memory with stmatrix (in the TMA swizzle
//    pattern) → TMA store. Rows and columns outside the tensor are clipped by the TMA unit, so
//    tails need no masking here. Its staging tile (BLOCK_M x BLOCK_N bf16) takes shared memory
//    that would otherwise hold pipeline stages.
//  * Bf16DirectEpilogue: FP32 accumulators → bf16 → a 4 x 4 transpose inside each quad of lanes
//    (shuffles) → 16-byte global stores straight from registers, masked by row and column. No
//    staging tile, so the tile gets one more stage (256 x 128: 4 instead of 3; 128 x 128: 6
//    instead of 5).
#pragma once
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "kernels/sm90/scheduler.cuh"
#include "ptx/ptx.cuh"

namespace moekit::sm90 {

template <class T>
struct Bf16TmaEpilogue {
  static constexpr int kBlockM = T::kBlockM;
  static constexpr int kBlockN = T::kBlockN;
  static constexpr u32 kMathThreads = T::kMathThreads;
  static_assert(T::kWgN == 1, "the bf16 epilogue stores tiles of warpgroups stacked along M");
  static constexpr u32 kSmemBytes = gemm_smem_d_bytes(kBlockM, kBlockN);
  static constexpr u32 kSwizzle = gemm_d_swizzle_bytes(kBlockN);  // 0: unswizzled rows
  static constexpr u32 kAtomCols = gemm_d_box_cols(kBlockN);       // bf16 columns per atom
  static constexpr u32 kRowBytes = kAtomCols * 2;                  // bytes per atom row
  static constexpr u32 kChunksPerRow = kRowBytes / 16;             // 16-byte chunks per atom row
  static constexpr u32 kAtoms = kBlockN / kAtomCols;
  static constexpr u32 kAtomBytes = kBlockM * kRowBytes;
  static_assert(kBlockN % kAtomCols == 0, "BLOCK_N must be a whole number of swizzle atoms");

  /// Shared-memory offset of 16-byte chunk `chunk` (8 columns) of tile row `row`, in the layout
  /// the TMA store expects: column atoms of kSwizzle-byte rows, 16-byte units XOR-swizzled.
  __device__ __forceinline__ static u32 staging_offset(u32 row, u32 chunk) {
    if constexpr (kSwizzle == 0) return row * kRowBytes + chunk * 16;
    const u32 atom = chunk / kChunksPerRow;
    const u32 byte = row * kSwizzle + (chunk % kChunksPerRow) * 16;
    const u32 line = byte / 128;
    const u32 unit = ((byte / 16) % 8) ^ (line % kChunksPerRow);
    return atom * kAtomBytes + line * 128 + unit * 16;
  }

  /// Stores the tile's accumulators `acc` (wgmma layout, kBlockN/2 per thread and wave, wave w's
  /// rows 128 w further down) at (t.m0, t.n0).
  /// `smem_d` is the 1024-byte aligned staging buffer. Called by all math threads. Whole tiles go
  /// out through the TMA store; a tile with fewer valid rows (grouped GEMMs: the rest belong to
  /// padding or another group) is copied row by row so nothing past its valid rows is written.
  /// P: the family's parameters with the bf16 output (DenseGemmParams, GroupedGemmParams).
  template <class P>
  __device__ __forceinline__ static void store(const float (&acc)[kBlockN / 2 * T::kWaves], const Tile& t,
                                               const P& p,
                                               u32 smem_d, const ptx::TmaDescriptor& tma_d,
                                               const MathThread& th) {
#if MOEKIT_DIAG_NO_EPILOGUE
    diag_sink(acc, static_cast<float*>(p.d));
    return;
#endif
    const u32 n = p.n;
    // The previous tile's TMA store must have finished reading the staging buffer.
    if (th.warpgroup == 0 && th.warp == 0 && th.lane == 0) ptx::tma_store_wait_read<0>();
    ptx::named_barrier_sync(1, kMathThreads);

#pragma unroll
    for (u32 w = 0; w < u32(T::kWaves); ++w) {
      const u32 row = w * 128 + th.warpgroup * 64 + th.warp * 16 + (th.lane % 16);
      const float* a = acc + w * (kBlockN / 2);
#pragma unroll
      for (u32 i = 0; i < kBlockN / 8; ++i) {
        ptx::stmatrix_x2(smem_d + staging_offset(row, i), ptx::pack_bf16x2(a[4 * i + 0], a[4 * i + 1]),
                         ptx::pack_bf16x2(a[4 * i + 2], a[4 * i + 3]));
      }
    }
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(1, kMathThreads);

    if (t.valid_rows < u32(kBlockM)) {
      constexpr u32 kChunks = kBlockN / 8;
      const u32 tid = th.warpgroup * 128 + th.warp * 32 + th.lane;
      for (u32 i = tid; i < t.valid_rows * kChunks; i += kMathThreads) {
        const u32 r = i / kChunks, c = i % kChunks;
        const u32 col = t.n0 + c * 8;
        if (col >= n) continue;
        u32 v[4];
        ptx::ld_shared_v4(smem_d + staging_offset(r, c), v);
        ptx::st_global_v4(static_cast<ptx::u16*>(p.d) + (static_cast<ptx::u64>(t.m0 + r) * p.ldd + col), v);
      }
      // The loop above diverges; the next tile's wgmma (.sync.aligned) needs a converged warp.
      __syncwarp();
      return;
    }
    if (th.warpgroup == 0 && th.warp == 0 && th.lane == 0) {
#pragma unroll
      for (u32 a = 0; a < kAtoms; ++a) {
        if (t.n0 + a * kAtomCols < n)
          ptx::tma_store_2d(&tma_d, smem_d + a * kAtomBytes, int(t.n0 + a * kAtomCols), int(t.m0));
      }
      ptx::tma_store_commit();
    }
  }

  /// Called once by every math thread after the last tile: waits for outstanding stores.
  __device__ __forceinline__ static void finish(const MathThread& th, const GemmParams&) {
    if (th.warpgroup == 0 && th.warp == 0 && th.lane == 0) ptx::tma_store_wait<0>();
  }
};

/// Direct-store bf16 epilogue (no shared memory). In the wgmma accumulator layout lane l of a warp
/// holds, per 8-column chunk c, columns 8c + 2(l % 4) + {0, 1} of rows l / 4 and l / 4 + 8. Four
/// chunks' worth of one row lie in the quad's 16 words; transposing them across the quad leaves
/// lane q of the quad with all 8 columns (16 bytes) of chunk 4j + q, so a warp store writes 8 rows x
/// 64 contiguous bytes (whole 32-byte sectors).
template <class T>
struct Bf16DirectEpilogue {
  static constexpr int kBlockM = T::kBlockM;
  static constexpr int kBlockN = T::kBlockN;
  static_assert(T::kWgN == 1, "the bf16 epilogue stores tiles of warpgroups stacked along M");
  static constexpr u32 kSmemBytes = 0;
  static constexpr u32 kChunks = kBlockN / 8;  // 8-column (16-byte) chunks per row

  /// One butterfly step of quad_transpose with the partner lane q ^ kMask: in each pair of words
  /// (c, c | kMask), a lane whose bit kMask is set gives its lower word for the partner's upper one;
  /// the other lane the reverse.
  template <u32 kMask>
  __device__ __forceinline__ static void butterfly(u32 (&x)[4], u32 q) {
    constexpr u32 c0 = 0, c1 = kMask == 1 ? 2u : 1u;  // the two pairs' lower words
    const bool upper = (q & kMask) != 0;
    const u32 s0 = upper ? x[c0] : x[c0 | kMask], s1 = upper ? x[c1] : x[c1 | kMask];
    const u32 r0 = __shfl_xor_sync(0xffffffffu, s0, kMask), r1 = __shfl_xor_sync(0xffffffffu, s1, kMask);
    if (upper) {
      x[c0] = r0;
      x[c1] = r1;
    } else {
      x[c0 | kMask] = r0;
      x[c1 | kMask] = r1;
    }
  }

  /// x[c] = this lane's word of chunk c (of a group of four); afterwards x[s] = lane s's word of
  /// chunk q (q = this lane's index in its quad): a 4 x 4 transpose in two butterfly steps.
  __device__ __forceinline__ static void quad_transpose(u32 (&x)[4], u32 q) {
    butterfly<1>(x, q);
    butterfly<2>(x, q);
  }

  /// Stores the tile's accumulators `acc` (wgmma layout, kBlockN/2 per thread and wave, wave w's
  /// rows 128 w further down) at (t.m0, t.n0): rows below t.valid_rows and the tensor's p.m rows,
  /// columns below p.n (a multiple of 8). Called by all math threads, converged.
  template <class P>
  __device__ __forceinline__ static void store(const float (&acc)[kBlockN / 2 * T::kWaves], const Tile& t,
                                               const P& p, u32, const ptx::TmaDescriptor&,
                                               const MathThread& th) {
#if MOEKIT_DIAG_NO_EPILOGUE
    diag_sink(acc, static_cast<float*>(p.d));
    return;
#endif
    const u32 q = th.lane % 4;
    // Rows to store: the valid ones inside the tensor (a ghost tile of a B-multicast pair may start
    // at or past p.m; the TMA store clips such rows, here they are masked).
    const u32 rows = t.m0 >= p.m ? 0u : (t.valid_rows < p.m - t.m0 ? t.valid_rows : p.m - t.m0);
    ptx::u16* const d = static_cast<ptx::u16*>(p.d);
#pragma unroll
    for (u32 w = 0; w < u32(T::kWaves); ++w) {
#pragma unroll
      for (u32 h = 0; h < 2; ++h) {  // rows r and r + 8 of this lane
        const u32 row = w * 128 + th.warpgroup * 64 + th.warp * 16 + th.lane / 4 + 8 * h;
        const bool row_ok = row < rows;
        ptx::u16* const drow = d + (static_cast<ptx::u64>(t.m0 + row) * p.ldd + t.n0);
        const float* a = acc + w * (kBlockN / 2) + 2 * h;
#pragma unroll
        for (u32 g = 0; g < (kChunks + 3) / 4; ++g) {
          u32 x[4];
#pragma unroll
          for (u32 c = 0; c < 4; ++c) {
            const u32 chunk = 4 * g + c;
            x[c] = chunk < kChunks ? ptx::pack_bf16x2(a[4 * chunk], a[4 * chunk + 1]) : 0u;
          }
          quad_transpose(x, q);  // every lane takes part, also where it stores nothing
          const u32 chunk = 4 * g + q;
          ptx::st_global_v4_if(drow + 8 * chunk, x, row_ok && chunk < kChunks && t.n0 + 8 * chunk < p.n);
        }
      }
    }
    // A barrier (as the TMA epilogue has): without it ptxas no longer proves the math warps
    // converged at the next tile's K loop and keeps its stage addresses and wgmma descriptors out
    // of the uniform registers (SASS: BRA.DIV before every wgmma group; measured on the H100: the
    // 256 x 128 K loop 45.4 instead of 43.1 us over 56 K blocks). __syncwarp() does not do it.
    ptx::named_barrier_sync(1, T::kMathThreads);
  }

  /// Nothing to wait for: the stores complete with the kernel.
  __device__ __forceinline__ static void finish(const MathThread&, const GemmParams&) {}
};

/// The bf16 epilogue of configuration GemmConfig::direct_store (no <type_traits> under NVRTC).
template <class T, bool kDirectStore>
struct Bf16EpilogueOf {
  using type = Bf16TmaEpilogue<T>;
};
template <class T>
struct Bf16EpilogueOf<T, true> {
  using type = Bf16DirectEpilogue<T>;
};
template <class T, bool kDirectStore>
using Bf16Epilogue = typename Bf16EpilogueOf<T, kDirectStore>::type;

}  // namespace moekit::sm90
