// The expert-parallel layer's host decisions (include/moekit/moe_ep_layer.h), without NCCL so the
// CPU tests pin them (tests/cpu/test_ep_plan.cpp): the validated configuration of a rank's local
// slice, the record that travels with each dispatched row, and the workspace layout.
#pragma once
#include <cstddef>
#include <cstdint>

#include "moekit/moe_ep_config.h"

namespace moekit::detail {

/// Most ranks of one expert-parallel group (a token's destination set is a 32-bit mask).
constexpr int kEpMaxRanks = 32;

/// The record that travels with each dispatched row (FP32 words, row-major [rows, words]): the
/// row's kb = ceil(H/128) scales, then its k ids (int32 bits; invalid and absent ones −1), then its
/// k router weights. One transfer per destination for all of them.
struct EpMeta {
  int kb = 0, top_k = 0;
  constexpr int64_t words() const { return kb + 2 * int64_t(top_k); }
};

/// Validates `c` for rank `rank` of `world` (kInvalidArgument naming the field: world in
/// [1, kEpMaxRanks], E a multiple of world, local_offset / local_count 0, gemm1_input not
/// kPermuted, I a multiple of 64, max_tokens_per_rank ≥ 1 and world · max_tokens_per_rank · k <
/// 2^31, · H < 2^32, then MoeLayer::validate) and returns the MoeConfig of the rank's local
/// experts [rank · E/world, +E/world): caller ids (the token's rank routes), gathered GEMM1 input
/// (MXFP4 weights: the received rows are copied per slot instead, MoePlan::prequantized).
MoeConfig ep_local_config(const MoeEpConfig& c, int rank, int world);

/// Byte offsets of the forward's workspace regions, 256-byte aligned, in carve order (C =
/// max_tokens_per_rank, R = world · C rows received at most; a zero-size region shares its
/// offset with the next).
struct EpWorkspacePlan {
  size_t ids = 0, weights = 0;     ///< routed from logits [C, k]
  size_t invalid = 0;              ///< [1]
  size_t send_x = 0;               ///< low latency [C, H]; high throughput [world, C, H]
  size_t send_meta = 0;            ///< the rows' records
  size_t pos = 0;                  ///< high throughput: [C, world]
  size_t counts = 0;               ///< [2 world]: rows sent to, received from each rank
  size_t map = 0, ones = 0;        ///< combine map [C, max(world, k)], ones [C, world]
  size_t recv_x = 0, recv_meta = 0;  ///< [R, H], R records
  size_t recv_ids = 0, recv_w = 0;   ///< unpacked [R, k]
  size_t recv_sx = 0;              ///< the received scales as the local plan reads them (physical over R rows, or token-major)
  size_t local_invalid = 0;        ///< [1]
  size_t y_local = 0, back = 0;    ///< bf16 [R, H] (deterministic [R, k, H]), sent and returned
  size_t local_ws = 0;             ///< the local forward's workspace (local_ws_bytes)
  size_t local_ws_bytes = 0;
  size_t bytes = 0;                ///< total
};

/// The workspace layout for `c` over `world` ranks, given the local forward's workspace bytes for
/// R rows (moe_forward_workspace_size: it depends on the device).
EpWorkspacePlan ep_workspace_plan(const MoeEpConfig& c, int world, size_t local_ws_bytes);

}  // namespace moekit::detail
