// The grouped FP8 GEMMs' kernel bodies, contiguous and masked layouts (host launcher:
// gemm/grouped_gemm.cpp).
#pragma once
#include "kernels/sm90/epilogue_bf16.cuh"
#include "kernels/sm90/fp8_gemm_mainloop.cuh"

namespace moekit::sm90 {

/// Contiguous (flat, expert-sorted, 128-aligned segments) grouped GEMM (kDirectStore as the dense GEMM's).
template <int kBlockM, int kBlockN, int kStages, int kCluster, bool kDirectStore = false>
__device__ __forceinline__ void fp8_gemm_contiguous(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                                    const ptx::TmaDescriptor& tma_sfa,
                                                    const ptx::TmaDescriptor& tma_d, const GroupedGemmParams& p) {
  static_assert(kCluster == 1 || gemm_cluster_shares_a(kBlockM, kCluster),
                "grouped schedulers pair CTAs only along N (256-row tiles sharing A)");
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster>;
  fp8_gemm_mainloop<T, ContiguousScheduler<kBlockM, kBlockN, kCluster>, Bf16Epilogue<T, kDirectStore>>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

/// The contiguous grouped GEMM on MXFP4 B (prepared as the MoE layer's W2, moe_weights_mxfp4.cu):
/// kMxStages raw slots (kernels/sm90/mxfp4_loader.cuh).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kMxStages, bool kDirectStore = false>
__device__ __forceinline__ void fp8_gemm_contiguous_mxfp4(const ptx::TmaDescriptor& tma_a,
                                                          const ptx::TmaDescriptor& tma_b,
                                                          const ptx::TmaDescriptor& tma_sfa,
                                                          const ptx::TmaDescriptor& tma_d, const GroupedGemmParams& p) {
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster, 1, 128, 128, 1, kMxStages>;
  fp8_gemm_mainloop<T, ContiguousScheduler<kBlockM, kBlockN, kCluster>, Bf16Epilogue<T, kDirectStore>>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

/// Masked ([E, max_m] with per-group counts) grouped GEMM (kDirectStore as the dense GEMM's).
template <int kBlockM, int kBlockN, int kStages, int kCluster, bool kDirectStore = false>
__device__ __forceinline__ void fp8_gemm_masked(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                                const ptx::TmaDescriptor& tma_sfa, const ptx::TmaDescriptor& tma_d,
                                                const GroupedGemmParams& p) {
  static_assert(kCluster == 1 || gemm_cluster_shares_a(kBlockM, kCluster),
                "grouped schedulers pair CTAs only along N (256-row tiles sharing A)");
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster>;
  fp8_gemm_mainloop<T, MaskedScheduler<kBlockM, kBlockN, kCluster>, Bf16Epilogue<T, kDirectStore>>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

}  // namespace moekit::sm90
