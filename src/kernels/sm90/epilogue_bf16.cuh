// BF16 output epilogue of the sm90 GEMM family: FP32 accumulators → bf16 → shared memory with
// stmatrix (in the TMA swizzle pattern) → TMA store. Rows and columns outside the tensor are
// clipped by the TMA unit, so tails need no masking here.
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
  __device__ __forceinline__ static void store(const float (&acc)[kBlockN / 2 * T::kWaves], const Tile& t,
                                               const GemmParams& p,
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

}  // namespace moekit::sm90
