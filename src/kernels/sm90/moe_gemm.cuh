// The MoE layer's fused grouped GEMMs (host launcher: moe/moe_gemm.cpp): the sm90 FP8 mainloop
// with the MoE epilogues (kernels/sm90/epilogue_moe.cuh) and the contiguous tile scheduler.
//   moe_gemm1_swiglu_*  : A = permuted activations (_gather_: rows read by token), B = prepared W1
//                         (gate/up interleaved by 64 rows, one B scale per 64 rows), out = FP8 h +
//                         its 1x128 scales.
//   moe_gemm2_scatter_* : A = h, B = W2, out = FP32 scatter-add of router-weighted rows into y.
//   *_mxfp4             : the same with MXFP4 weights (kernels/sm90/mxfp4_loader.cuh).
//   *_mxfp4_decode      : the same for decode-sized groups, weights as the MMA's A operand
//                         (kernels/sm90/mxfp4_decode_gemm.cuh): kBlockM = tokens per tile,
//                         kBlockN = weight rows per tile, kStages = A stages.
#pragma once
#include "kernels/sm90/epilogue_moe.cuh"
#include "kernels/sm90/epilogue_mx_decode.cuh"
#include "kernels/sm90/fp8_gemm_mainloop.cuh"
#include "kernels/sm90/mxfp4_decode_gemm.cuh"

namespace moekit::sm90 {

/// GEMM1 tile traits: 64 rows x 256 prepared-W1 rows (128 h columns), two warpgroups along N.
/// kPromoteK: K per tensor-core accumulation chain (Fp8GemmTraits::kPromoteK).
/// kMxStages: MXFP4 W1 (Fp8GemmTraits::kMxStages), 0 = FP8.
template <int kStages, int kCluster, int kPromoteK, int kMxStages = 0>
using MoeGemm1Traits = Fp8GemmTraits<64, 256, kStages, kCluster, 2, 64, kPromoteK, 1, kMxStages>;

template <int kBlockM, int kBlockN, int kStages, int kCluster, int kPromoteK = 128>
__device__ __forceinline__ void moe_gemm1_swiglu_contiguous(const ptx::TmaDescriptor& tma_a,
                                                            const ptx::TmaDescriptor& tma_b,
                                                            const ptx::TmaDescriptor& tma_sfa,
                                                            const ptx::TmaDescriptor& tma_d, const MoeGemm1Params& p) {
  static_assert(kBlockM == 64 && kBlockN == 256, "GEMM1 runs 64 x 256 tiles");
  // kCluster = 2: the two 64-row tiles of a 128-row block share (multicast) their B tile.
  using T = MoeGemm1Traits<kStages, kCluster, kPromoteK>;
  fp8_gemm_mainloop<T, ContiguousScheduler<64, 256, kCluster, MoeGemm1Params>, SwigluFp8Epilogue<T>>(tma_a, tma_b,
                                                                                                    tma_sfa, tma_d, p);
}

/// The gather variant: A rows are read by token (MoeGemm1Params::a_gather, row_map, top_k) from the
/// activations quantized once per token, so no permuted copy exists (fp8_gemm_loaders.cuh GatherALoader).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kPromoteK = 128>
__device__ __forceinline__ void moe_gemm1_swiglu_gather_contiguous(const ptx::TmaDescriptor& tma_a,
                                                                   const ptx::TmaDescriptor& tma_b,
                                                                   const ptx::TmaDescriptor& tma_sfa,
                                                                   const ptx::TmaDescriptor& tma_d,
                                                                   const MoeGemm1Params& p) {
  static_assert(kBlockM == 64 && kBlockN == 256, "GEMM1 runs 64 x 256 tiles");
  using T = MoeGemm1Traits<kStages, kCluster, kPromoteK>;
  fp8_gemm_mainloop<T, ContiguousScheduler<64, 256, kCluster, MoeGemm1Params>, SwigluFp8Epilogue<T>, true>(
      tma_a, tma_b, tma_sfa, tma_d, p);
}

/// GEMM1 on MXFP4 W1 (prepared, moe_weights_mxfp4.cu): kMxStages raw slots (mxfp4_loader.cuh),
/// A from the permuted activations.
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kMxStages, int kPromoteK = 128>
__device__ __forceinline__ void moe_gemm1_swiglu_mxfp4(const ptx::TmaDescriptor& tma_a, const ptx::TmaDescriptor& tma_b,
                                                       const ptx::TmaDescriptor& tma_sfa,
                                                       const ptx::TmaDescriptor& tma_d, const MoeGemm1Params& p) {
  static_assert(kBlockM == 64 && kBlockN == 256, "GEMM1 runs 64 x 256 tiles");
  using T = MoeGemm1Traits<kStages, kCluster, kPromoteK, kMxStages>;
  fp8_gemm_mainloop<T, ContiguousScheduler<64, 256, kCluster, MoeGemm1Params>, SwigluFp8Epilogue<T>>(tma_a, tma_b,
                                                                                                    tma_sfa, tma_d, p);
}

/// GEMM2 + scatter-add on MXFP4 W2 (prepared): kMxStages raw slots.
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kMxStages>
__device__ __forceinline__ void moe_gemm2_scatter_mxfp4(const ptx::TmaDescriptor& tma_a,
                                                        const ptx::TmaDescriptor& tma_b,
                                                        const ptx::TmaDescriptor& tma_sfa,
                                                        const ptx::TmaDescriptor& tma_d, const MoeGemm2Params& p) {
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster, 1, 128, 128, 1, kMxStages>;
  fp8_gemm_mainloop<T, ContiguousScheduler<kBlockM, kBlockN, kCluster>, ScatterAddEpilogue<T>>(tma_a, tma_b, tma_sfa,
                                                                                               tma_d, p);
}

/// GEMM1 (+ SwiGLU + requant) on MXFP4 W1 for decode-sized groups: kBlockM tokens x 256 prepared
/// rows; kStreamK: stream-K pieces (scheduler_stream_k.cuh), partial sums handed over through
/// MoeGemm1Fields::sk_partials; kKGroups: K groups per tile; kGatherA: A read by token
/// (MxDecodeTraits).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kMxStages, bool kStreamK, int kKGroups,
          bool kGatherA, int kPromoteK = 128>
__device__ __forceinline__ void moe_gemm1_swiglu_mxfp4_decode(const ptx::TmaDescriptor& tma_a,
                                                              const ptx::TmaDescriptor& tma_b,
                                                              const ptx::TmaDescriptor& tma_sfa,
                                                              const ptx::TmaDescriptor& tma_d,
                                                              const MoeGemm1Params& p) {
  static_assert(kBlockN == 256 && kCluster == 1, "GEMM1 decode tiles: 256 prepared W1 rows, single CTAs");
  static_assert(!(kStreamK && kGatherA), "the stream-K partial sums share the gather fields");
  using T = MxDecodeTraits<kBlockM, kBlockN, kStages, kMxStages, kPromoteK, 64, kStreamK, kKGroups, kGatherA>;
  if constexpr (kStreamK)
    mx_decode_gemm<T, StreamKScheduler<kBlockM, kBlockN, MoeGemm1Params>, MxDecodeSwigluEpilogue<T>>(tma_a, tma_b,
                                                                                                  tma_sfa, tma_d, p);
  else
    mx_decode_gemm<T, ContiguousScheduler<kBlockM, kBlockN, 1, MoeGemm1Params>, MxDecodeSwigluEpilogue<T>>(
        tma_a, tma_b, tma_sfa, tma_d, p);
}

/// GEMM2 + scatter-add on MXFP4 W2 for decode-sized groups: kBlockM tokens x kBlockN rows of W2;
/// kStreamK: stream-K pieces, each adding its partial sum; kKGroups: K groups per tile (h is
/// permuted: kGatherA false).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kMxStages, bool kStreamK, int kKGroups,
          bool kGatherA>
__device__ __forceinline__ void moe_gemm2_scatter_mxfp4_decode(const ptx::TmaDescriptor& tma_a,
                                                               const ptx::TmaDescriptor& tma_b,
                                                               const ptx::TmaDescriptor& tma_sfa,
                                                               const ptx::TmaDescriptor& tma_d,
                                                               const MoeGemm2Params& p) {
  static_assert(kCluster == 1 && !kGatherA, "single CTAs; h in the permuted order");
  using T = MxDecodeTraits<kBlockM, kBlockN, kStages, kMxStages, 128, 128, kStreamK, kKGroups>;
  if constexpr (kStreamK)
    mx_decode_gemm<T, StreamKScheduler<kBlockM, kBlockN>, MxDecodeScatterEpilogue<T>>(tma_a, tma_b, tma_sfa, tma_d, p);
  else
    mx_decode_gemm<T, ContiguousScheduler<kBlockM, kBlockN, 1>, MxDecodeScatterEpilogue<T>>(tma_a, tma_b, tma_sfa,
                                                                                             tma_d, p);
}

template <int kBlockM, int kBlockN, int kStages, int kCluster>
__device__ __forceinline__ void moe_gemm2_scatter_contiguous(const ptx::TmaDescriptor& tma_a,
                                                             const ptx::TmaDescriptor& tma_b,
                                                             const ptx::TmaDescriptor& tma_sfa,
                                                             const ptx::TmaDescriptor& tma_d, const MoeGemm2Params& p) {
  static_assert(kCluster == 1 || gemm_cluster_shares_a(kBlockM, kCluster),
                "grouped schedulers pair CTAs only along N (256-row tiles sharing A)");
  using T = Fp8GemmTraits<kBlockM, kBlockN, kStages, kCluster>;
  fp8_gemm_mainloop<T, ContiguousScheduler<kBlockM, kBlockN, kCluster>, ScatterAddEpilogue<T>>(tma_a, tma_b, tma_sfa,
                                                                                               tma_d, p);
}

}  // namespace moekit::sm90
