// The dense FP8 GEMM's kernel body (host launcher: gemm/gemm.cpp).
#pragma once
#include "kernels/sm90/epilogue_bf16.cuh"
#include "kernels/sm90/fp8_gemm_mainloop.cuh"

namespace moekit::sm90 {

/// The dense GEMM: DenseScheduler + a bf16 epilogue (TMA store, or direct stores with
/// kDirectStore: GemmConfig::direct_store); with kSplitK > 1, clusters of kSplitK CTAs share each
/// tile's K blocks and rank 0 stores the sum (SplitKReduce).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kSplitK = 1, bool kDirectStore = false>
__device__ __forceinline__ void fp8_gemm_dense(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                               const ptx::TmaDescriptor& tma_sfa, const ptx::TmaDescriptor& tma_d,
                                               const DenseGemmParams& p) {
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster, 1, 128, 128, kSplitK>;
  fp8_gemm_mainloop<T, DenseScheduler<kBlockM, kBlockN, kCluster, kSplitK>, Bf16Epilogue<T, kDirectStore>>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

}  // namespace moekit::sm90
