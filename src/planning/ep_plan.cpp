// The expert-parallel layer's host decisions (ep_plan.h).
#include "planning/ep_plan.h"

#include <algorithm>

#include "common/check.h"
#include "moe/workspace_carver.h"
#include "moekit/numerics.h"

namespace moekit::detail {

MoeConfig ep_local_config(const MoeEpConfig& c, int rank, int world) {
  constexpr auto kInv = ErrorCode::kInvalidArgument;
  const char* fn = "moekit::MoeEpLayer";
  const MoeConfig& l = c.layer;
  MOEKIT_REQUIRE(world >= 1 && world <= kEpMaxRanks && rank >= 0 && rank < world, kInv, fn, ": rank ", rank, " of ",
                 world, " ranks (1 to ", kEpMaxRanks, " ranks)");
  MOEKIT_REQUIRE(l.local_offset == 0 && l.local_count == 0, kInv, fn,
                 ": layer.local_offset / local_count must be 0 (each rank's slice follows from its rank)");
  MOEKIT_REQUIRE(l.num_experts > 0 && l.num_experts % world == 0, kInv, fn, ": layer.num_experts = ", l.num_experts,
                 " must be a positive multiple of the ranks (", world, ")");
  MOEKIT_REQUIRE(l.gemm1_input != MoeGemm1Input::kPermuted, kInv, fn,
                 ": gemm1_input kPermuted: the received rows are read in place (kAuto or kGathered)");
  MOEKIT_REQUIRE(l.inter % 64 == 0, kInv, fn, ": layer.inter = ", l.inter,
                 " must be a multiple of 64 with expert parallelism (the fused pipeline)");
  const int64_t cap = c.max_tokens_per_rank;
  MOEKIT_REQUIRE(cap >= 1, kInv, fn, ": max_tokens_per_rank = ", cap, " must be >= 1");
  MOEKIT_REQUIRE(l.hidden > 0 && l.top_k > 0 && cap * world * l.top_k < (int64_t(1) << 31) &&
                     cap * world * l.hidden < (int64_t(1) << 32),
                 kInv, fn, ": max_tokens_per_rank = ", cap, " is too large for ", world,
                 " ranks (ranks * max_tokens_per_rank * k < 2^31 and * H < 2^32)");
  MoeLayer::validate(l);
  MoeConfig local = l;
  local.local_count = l.num_experts / world;
  local.local_offset = rank * local.local_count;
  local.routing.reset();  // the token's rank routes; the owners get ids
  local.gemm1_input = MoeGemm1Input::kGathered;
  return local;
}

EpWorkspacePlan ep_workspace_plan(const MoeEpConfig& c, int world, size_t local_ws_bytes) {
  WorkspaceCarver w{nullptr};
  const auto at = [&](int64_t bytes) {  // the next region's offset
    w.take<char>(0);
    const size_t off = w.used;
    w.used += static_cast<size_t>(std::max<int64_t>(bytes, 0));
    return off;
  };
  const int64_t cap = c.max_tokens_per_rank, rows = cap * world, h = c.layer.hidden, k = c.layer.top_k;
  const int64_t words = EpMeta{int(ceil_div(h, kQuantBlock)), int(k)}.words();
  const bool ht = c.mode == MoeEpMode::kHighThroughput;
  const int64_t blocks = ht ? world : 1;
  const int64_t out_cols = c.layer.deterministic ? k * h : h;
  const int64_t routed = c.layer.routing ? cap * k : 0;
  EpWorkspacePlan p;
  p.ids = at(routed * 4);
  p.weights = at(routed * 4);
  p.invalid = at(4);
  p.send_x = at(blocks * cap * h);
  p.send_meta = at(blocks * cap * words * 4);
  p.pos = at(ht ? cap * world * 4 : 0);
  p.counts = at(2 * int64_t(world) * 4);
  p.map = at(cap * std::max<int64_t>(world, k) * 4);
  p.ones = at(cap * world * 4);
  p.recv_x = at(rows * h);
  p.recv_meta = at(rows * words * 4);
  p.recv_ids = at(rows * k * 4);
  p.recv_w = at(rows * k * 4);
  p.recv_sx = at(sfa_physical_size(rows, h) * 4);
  p.local_invalid = at(4);
  p.y_local = at(rows * out_cols * 2);
  p.back = at(rows * out_cols * 2);
  p.local_ws_bytes = local_ws_bytes;
  p.local_ws = at(static_cast<int64_t>(local_ws_bytes));
  p.bytes = w.used;
  return p;
}

}  // namespace moekit::detail
