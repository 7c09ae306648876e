// The expert-parallel layer's own kernels (moe_ep_layer.cpp): which ranks each token goes to and
// where its row lands there, the packing of the high-throughput mode's per-rank blocks, and the
// scales' move into the GEMM's physical layout on the receiving rank. The transfers are NCCL's;
// the expert math is the MoE layer's; the final sums are moekit::moe_combine.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "planning/ep_plan.h"

namespace moekit::detail {

/// The source side of the dispatch (device pointers, this rank's tokens): ep_route, then
/// ep_quantize_pack.
struct EpSourceArgs {
  const void* x = nullptr;        ///< bf16 [T, H]
  const int32_t* ids = nullptr;   ///< [T, k]
  const float* weights = nullptr;
  int64_t num_tokens = 0;         ///< T ≤ capacity
  int64_t hidden = 0;
  int top_k = 0;
  int num_experts = 0;            ///< E
  int world = 1;                  ///< G; rank p owns experts [p · E/G, (p + 1) · E/G)
  int64_t capacity = 0;           ///< rows per rank block (max_tokens_per_rank)
  /// true (high throughput): token t's row in rank p's block is its rank among the tokens sent to
  /// p (in token order): pos [T, G] (−1: not sent) and send_counts [G].
  /// false (low latency): row t of the one block every rank receives.
  bool compact = false;
  int32_t* pos = nullptr;
  int32_t* send_counts = nullptr;
  uint8_t* send_x = nullptr;      ///< [blocks · capacity, H]
  float* send_meta = nullptr;     ///< [blocks · capacity] records (EpMeta of H and k)
  /// Where the token's rank finds its combine inputs in the returned blocks [G, capacity, ...]:
  /// deterministic: map [T, k], slot (t, j) → (p · capacity + row) · k + j of its owner p, −1 for
  /// a dropped slot; else map [T, G], (t, p) → p · capacity + row, −1 where p has no slot of t,
  /// and ones [T, G] = 1 (moe_combine's weights for the partial sums).
  bool deterministic = false;
  int32_t* combine_map = nullptr;
  float* ones = nullptr;
  int32_t* invalid_count = nullptr;  ///< optional: set to the slots with an id outside [−1, E)
};

/// Which ranks each token goes to: the invalid count, the combine maps of low latency and its
/// records' routing (ids outside [0, E) and the padding rows ≥ T get −1), or (compact) each
/// token's row per rank and the counts.
void ep_route(const EpSourceArgs& a, cudaStream_t stream);

/// Each token of x quantized once (FP8 E4M3, 1x128 scales, bit for bit the MoE layer's
/// quantization) and stored into every row it is sent to, its scales into that row's record;
/// compact: also the records' routing and the combine maps.
void ep_quantize_pack(const EpSourceArgs& a, cudaStream_t stream);

/// The receiving side: `rows` records → the scales, in the GEMM's physical layout over `rows`
/// (numerics.h: sx[kb · sfa_ld(rows) + r]) or token-major [rows, kb] (`physical` false), and the
/// ids / weights as [rows, k] arrays.
void ep_unpack_meta(const float* meta, EpMeta m, int64_t rows, bool physical, float* sx, int32_t* ids, float* weights,
                    cudaStream_t stream);

}  // namespace moekit::detail
