// Host side of the MoE layer's fused grouped GEMMs (kernels/sm90/moe_gemm.cuh) on the contiguous
// expert layout of moe_sort. Internal: arguments are assumed validated by the layer; every choice
// (tile configuration, accumulation chain, scheduling) comes from the plan (planning/moe_plan.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include <cuda_runtime_api.h>

#include "gemm/gemm_launch.h"
#include "planning/moe_plan.h"

namespace moekit::detail {

/// Rows per contiguous chunk of the K-block tiled prepared W1 (GEMM1's BLOCK_N).
constexpr int64_t kW1ChunkRows = 256;

/// GEMM1 + SwiGLU (+clamp) + 1x128 FP8 requantization of h. A comes either permuted (`a`, `sa`:
/// one copy per slot, rows sorted by expert) or, with `a_tokens` set, gathered: each token
/// quantized once, row r of the contiguous layout read from token row_map[r] / top_k (the gather
/// variant; no permuted copy).
struct MoeGemm1Args {
  const void* a = nullptr;    ///< FP8 [rows, H] permuted activations (row stride H)
  const float* sa = nullptr;  ///< their scales, physical A-scale layout over `rows`
  const void* a_tokens = nullptr;   ///< gather variant: FP8 [num_tokens, H] (row stride H)
  const float* sa_tokens = nullptr; ///< gather variant: their scales, physical layout over num_tokens
  int64_t num_tokens = 0;           ///< gather variant: T (T * H < 2^32)
  const int32_t* row_map = nullptr; ///< gather variant: permuted_to_expanded [rows]
  int top_k = 0;                    ///< gather variant: k
  int64_t rows = 0;           ///< allocated rows (moe_sort_rows_bound), multiple of 128
  int64_t hidden = 0;         ///< H = K
  int64_t inter = 0;          ///< I
  int num_experts = 0;        ///< local experts (groups)
  const int32_t* offsets = nullptr;  ///< [E + 1] 128-aligned segment starts
  const int32_t* counts = nullptr;   ///< [E] valid rows
  const void* w1p = nullptr;         ///< prepared W1, E x moe_prepared_w1_rows(I) rows, K-block tiled
  const float* sw1p = nullptr;       ///< prepared scales [E, rows/64, ceil(H/128)]
  float limit = 0.0f;                ///< clamp when > 0
  const float* b1 = nullptr;         ///< FP32 [E, 2I] biases (SPEC order) or null
  bool gpt_oss = false;              ///< gpt-oss's activation (MoeActivation::kGptOss)
  float alpha = 1.702f;              ///< its α
  void* hq = nullptr;                ///< FP8 [rows, I] (row stride I) out
  float* sh = nullptr;               ///< h scales out, physical layout over `rows`
  /// Optional device counter, 0 at launch (the caller zeroes it), used when plan.dynamic
  /// (GroupedLayoutParams::tile_counter). Null: static scheduling.
  unsigned* tile_counter = nullptr;
  /// plan.stream_k: kStreamKMaxCtas slots of gemm_stream_k_slot_floats(32) floats, and as many
  /// flags, zero at launch (the caller zeroes them; fp8_gemm_layout.cuh).
  float* sk_partials = nullptr;
  unsigned* sk_flags = nullptr;
  MoeGemm1Plan plan;  ///< the choices (plan_moe_gemm1)
};
void moe_gemm1_swiglu(const MoeGemm1Args& a, cudaStream_t stream);

/// GEMM2 + router weight + FP32 scatter-add into y_acc [T, H] (which the caller zeroes first).
struct MoeGemm2Args {
  const void* hq = nullptr;   ///< FP8 [rows, I]
  const float* sh = nullptr;  ///< h scales, physical layout over `rows`
  int64_t rows = 0;
  int64_t hidden = 0;  ///< H = N
  int64_t inter = 0;   ///< I = K
  int num_experts = 0;
  const int32_t* offsets = nullptr;
  const int32_t* counts = nullptr;
  const void* w2 = nullptr;    ///< FP8 [E, H, I]
  const float* sw2 = nullptr;  ///< [E, ceil(H/128), ceil(I/128)]
  const int32_t* row_map = nullptr;      ///< permuted_to_expanded
  const float* topk_weights = nullptr;   ///< [T * k]
  int top_k = 0;
  float* y_acc = nullptr;  ///< FP32 [T, H]
  const float* b2 = nullptr;  ///< FP32 [E, H] biases or null
  unsigned* tile_counter = nullptr;  ///< as MoeGemm1Args::tile_counter
  MoeGemm2Plan plan;                 ///< the choices (plan_moe_gemm2_scatter)
};
void moe_gemm2_scatter(const MoeGemm2Args& a, cudaStream_t stream);

/// The kernel body and launch family of the fused GEMM1 for `plan` (`gather`: A read by token),
/// and of GEMM2 (scatter-add, or the rows GEMM's contiguous body): what the launchers run, without
/// the launch-time parts (the D TMA map). I = `inter`.
struct MoeGemmKernel {
  GemmConfig config;
  Fp8GemmKernel kernel;
  Fp8GemmFamily family;
};
MoeGemmKernel moe_gemm1_kernel(const MoeGemm1Plan& plan, bool gather);
MoeGemmKernel moe_gemm2_kernel(const MoeGemm2Plan& plan);

/// The NVRTC sources (entry name, source) of the GEMMs a forward with `plan` launches (none for the
/// unfused layout or T = 0): `moekit jit warm --moe` compiles them ahead of time.
std::vector<std::pair<std::string, std::string>> moe_gemm_kernel_sources(const MoePlan& plan);

/// Writes the prepared W1 and its scales (layout in moe_weights.cu). Requires I % 64 == 0.
void moe_prepare_w1_fused(const void* w1, const float* sw1, int num_experts, int64_t hidden, int64_t inter, void* w1p,
                          float* sw1p, cudaStream_t stream);

/// Writes the prepared W1's scales alone (one per 64 rows and K block, from the SPEC layout's
/// sW1 [E, ceil(2I/128), ceil(H/128)]): part of moe_prepare_w1_fused, and the MXFP4 preparation's
/// last step (its block scales have the SPEC layout).
void moe_prepare_w1_scales(const float* sw1, int num_experts, int64_t hidden, int64_t inter, float* sw1p,
                           cudaStream_t stream);

/// MXFP4 weights (moe_weights_mxfp4.cu; the layout in kernels/sm90/fp8_gemm_layout.cuh kMxfp4Sub*):
/// codes [E, R, K/2] and UE8M0 scales [E, R, K/32] of R rows (W1: 2I in the SPEC order, W2: H) →
/// the kernels' sub-chunks and the FP32 scale per 128 x 128 block of the SPEC rows (as
/// moekit::mxfp4_to_fp8 computes them). W1: sub-chunks in the prepared W1's row order, K-block
/// tiled by kW1ChunkRows, into w1p; its block scales into sw1_blocks [E, ceil(2I/128),
/// ceil(H/128)], then the prepared scales into sw1p. W2: sub-chunks row-major by 32 rows into w2p,
/// block scales into sw2 [E, ceil(H/128), ceil(I/128)]. K = H or I, a multiple of 32.
/// `interleaved`: W1's rows are stored in gpt-oss's order (moekit::gpt_oss_w1_source_row); the
/// result is that of the SPEC order.
void moe_prepare_w1_mxfp4(const void* codes, const uint8_t* scales, bool interleaved, int num_experts, int64_t hidden,
                          int64_t inter, float* sw1_blocks, void* w1p, float* sw1p, cudaStream_t stream);
void moe_prepare_w2_mxfp4(const void* codes, const uint8_t* scales, int num_experts, int64_t hidden, int64_t inter,
                          void* w2p, float* sw2, cudaStream_t stream);
/// The FP8 form of E MXFP4 matrices [rows, k] (moekit::mxfp4_to_fp8 on the device, bit for bit): q
/// [E, rows, k] E4M3 and sb [E, ceil(rows/128), ceil(k/128)]; for benchmarks' FP8 baselines and
/// references on weights too large for the host conversion.
void mxfp4_to_fp8_device(const void* codes, const uint8_t* scales, int num_experts, int64_t rows, int64_t k, void* q,
                         float* sb, cudaStream_t stream);
/// Bytes of the MXFP4 sub-chunks of E experts of `rows` rows (a multiple of 32) over K = k.
int64_t moe_mxfp4_weight_bytes(int num_experts, int64_t rows, int64_t k);

/// Per-expert biases into FP32 dst [E, rows]: src FP32 or bf16 [E, rows]; interleaved_inter > 0:
/// src holds W1's rows in gpt-oss's order (moekit::gpt_oss_w1_source_row), dst the SPEC order.
void moe_prepare_bias(const void* src, bool bf16, int num_experts, int64_t rows, int64_t interleaved_inter, float* dst,
                      cudaStream_t stream);

/// y[t, c] = bf16(y_acc[t, c]) for T x H (H % 8 == 0, 16-byte aligned).
void moe_finalize_bf16(const float* y_acc, int64_t num_tokens, int64_t hidden, void* y, cudaStream_t stream);

}  // namespace moekit::detail
