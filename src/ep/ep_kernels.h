// The expert-parallel layer's own kernels (moe_ep_layer.cpp): which ranks each token goes to and
// where its row lands there, the packing of the high-throughput mode's per-rank blocks, and the
// scales' move into the GEMM's physical layout on the receiving rank. The transfers are NCCL's;
// the expert math is the MoE layer's; the final sums are moekit::moe_combine.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace moekit::detail {

/// Most ranks of one expert-parallel group (a token's destination set is a 32-bit mask).
constexpr int kEpMaxRanks = 32;

/// ep_route's inputs and outputs (device pointers, this rank's tokens).
struct EpRouteArgs {
  const int32_t* ids = nullptr;  ///< [T, k]
  const float* weights = nullptr;
  int64_t num_tokens = 0;        ///< T ≤ capacity
  int top_k = 0;
  int num_experts = 0;           ///< E
  int world = 1;                 ///< G; rank p owns experts [p · E/G, (p + 1) · E/G)
  int64_t capacity = 0;          ///< rows per rank block (max_tokens_per_rank)
  /// true (high throughput): token t's row in rank p's block is its rank among the tokens sent to
  /// p (a prefix sum); pos [T, G] and send_counts [G] are written. false (low latency): row t.
  bool compact = false;
  int32_t* pos = nullptr;
  int32_t* send_counts = nullptr;
  /// Low latency: the ids and weights every rank receives, [capacity, k]; ids outside [0, E) and
  /// rows ≥ T become −1.
  int32_t* send_ids = nullptr;
  float* send_weights = nullptr;
  /// Where the token's rank finds its combine inputs in the returned blocks [G, capacity, ...]:
  /// deterministic: map [T, k], slot (t, j) → (p · capacity + row) · k + j of its owner p, −1 for
  /// a dropped slot; else map [T, G], (t, p) → p · capacity + row, −1 where p has no slot of t,
  /// and ones [T, G] = 1 (moe_combine's weights for the partial sums).
  bool deterministic = false;
  int32_t* combine_map = nullptr;
  float* ones = nullptr;
  int32_t* invalid_count = nullptr;  ///< optional: set to the slots with an id outside [−1, E)
};

/// One CTA: the routing bookkeeping above.
void ep_route(const EpRouteArgs& a, cudaStream_t stream);

/// High throughput: copies each token's FP8 row (xq [T, H]), its scales (sxq, physical layout over
/// T rows) and its ids / weights (invalid ids → −1) into row pos[t, p] of block p of every rank p
/// it goes to: send_x [G, cap, H], send_sx [G, cap, kb] (token-major), send_ids / send_w [G, cap, k].
void ep_pack_rows(const uint8_t* xq, const float* sxq, const int32_t* ids, const float* weights, const int32_t* pos,
                  int64_t num_tokens, int64_t hidden, int top_k, int num_experts, int world, int64_t capacity,
                  uint8_t* send_x, float* send_sx, int32_t* send_ids, float* send_w, cudaStream_t stream);

/// Moves `rows` x kb scales (kb = ceil(H/128)) between layouts: dst[kb · dst_kb + r · dst_row] =
/// src[kb · src_kb + r · src_row]. Token-major [rows, kb] is (1, kb); the GEMM's physical layout
/// over m rows (numerics.h) is (sfa_ld(m), 1).
struct EpScaleLayout {
  int64_t kb_stride = 1, row_stride = 1;
};
void ep_copy_scales(const float* src, EpScaleLayout src_layout, float* dst, EpScaleLayout dst_layout, int64_t rows,
                    int64_t hidden, cudaStream_t stream);

}  // namespace moekit::detail
