// Split-K reduction of the sm90 GEMM family: the kSplitK CTAs of a thread-block cluster compute
// one tile over disjoint K ranges (DenseScheduler), and the CTA of rank 0 adds the others' FP32
// partial sums, read from their shared memory through DSMEM, before its epilogue stores the tile.
// No global workspace and no counters: the whole exchange lives in the cluster, so a launch needs
// no memset and replays in a CUDA graph as it is. The sum runs in rank order, so results are
// bit-identical run to run.
//
// Per CTA: the FP32 partial tile (one float4 column per math thread: float4 j of thread t at
// (j * kMathThreads + t) * 16, conflict-free; in the epilogue's staging buffer, which only rank 0
// uses for its own purpose) and two mbarriers — `full` (rank 0's: every math
// thread of every other rank has written its partials; (kSplitK - 1) x kMathThreads arrivals) and
// `free` (each other rank's: rank 0's math threads have read its partials, so the next tile may
// overwrite them; kMathThreads arrivals). Arrivals are .release.cluster, waits .acquire.cluster.
#pragma once
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "ptx/ptx.cuh"

namespace moekit::sm90 {

template <class T>
struct SplitKReduce {
  static constexpr u32 kAcc = u32(T::kBlockN) / 2;  ///< accumulators per math thread (one warpgroup along N)
  static_assert(T::kSplitK == 1 || (T::kWgN == 1 && kAcc % 4 == 0),
                "split-K reduces tiles of warpgroups stacked along M");
  static constexpr u32 kFullArrivals = u32(T::kSplitK - 1) * u32(T::kMathThreads);
  static constexpr u32 kFreeArrivals = u32(T::kMathThreads);

  u32 partials;  ///< shared address of this CTA's partial tile (gemm_split_k_partials_bytes; ranks > 0)
  u32 bars;      ///< its `full` mbarrier; `free` follows at bars + 8
  u32 rank;      ///< cluster rank
  u32 phase = 0;

  /// One thread, before the cluster-wide barrier that publishes mbarrier initialization.
  __device__ __forceinline__ void init() const {
    ptx::mbar_init(bars, kFullArrivals);
    ptx::mbar_init(bars + 8, kFreeArrivals);
  }

  /// Called by every math thread (`tid` in [0, kMathThreads)) after a tile's K loop, in the same
  /// tile order on every rank. Rank 0 returns true with `out` = the sum over the cluster's K
  /// ranges; the other ranks hand their partials over and return false (they store nothing).
  __device__ __forceinline__ bool reduce(float (&out)[kAcc], u32 tid) {
    const u32 slot = partials + tid * 16u;
    constexpr u32 kStride = u32(T::kMathThreads) * 16u;
    if (rank != 0) {
      ptx::mbar_wait_cluster(bars + 8, phase ^ 1u);  // rank 0 has read the previous tile's partials
#pragma unroll
      for (u32 j = 0; j < kAcc / 4; ++j)
        ptx::st_shared_v4_f32(slot + j * kStride, out[4 * j], out[4 * j + 1], out[4 * j + 2], out[4 * j + 3]);
      ptx::mbar_arrive_cluster_release(ptx::map_to_cta(bars, 0));
      phase ^= 1u;
      return false;
    }
    ptx::mbar_wait_cluster(bars, phase);
#pragma unroll 1
    for (u32 r = 1; r < u32(T::kSplitK); ++r) {
      const u32 peer = ptx::map_to_cta(slot, r);
#pragma unroll
      for (u32 j = 0; j < kAcc / 4; ++j) {
        float v[4];
        ptx::ld_shared_cluster_v4(peer + j * kStride, v);
        out[4 * j] += v[0];
        out[4 * j + 1] += v[1];
        out[4 * j + 2] += v[2];
        out[4 * j + 3] += v[3];
      }
      ptx::mbar_arrive_cluster_release(ptx::map_to_cta(bars + 8, r));
    }
    phase ^= 1u;
    return true;
  }
};

}  // namespace moekit::sm90
