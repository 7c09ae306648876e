#include "moe/moe_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "gemm/heuristic.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/numerics.h"
#include "runtime/knobs.h"

namespace moekit::detail {

namespace {

// Decode-sized groups (well under a 64-row tile): load A in 8-row boxes, only the valid rows —
// a 64-row box reads up to 63 padding rows per tile (measured at T = 64: GEMM1 read 7.15 GB from
// DRAM for 6.4 GB of W1).
int decode_a_box_rows(const MoeLoadEstimate& e) { return e.rows_per_active <= 32 ? 8 : 0; }

// Dynamic tile scheduling pays once the CTAs have enough units to rebalance: measured on the H100
// (deepseek-v3, docs/perf-notes.md v10) it cost 4 µs at T = 1 in GEMM2 (~3.9 units per CTA) and
// 7 µs at T = 4 in GEMM1 (~3.8), was neutral at ~2 and ~7-8, and gained from ~16 per CTA up.
constexpr double kDynamicMinUnitsPerCta = 6.0;

// The counter to schedule GEMM `gemm` (1 or 2) dynamically with, or null for static scheduling:
// a counter was given, the knob allows it, and either the caller forces it (tests) or the
// expected units (active experts x M units x N blocks of `c`) are enough per CTA.
unsigned* dynamic_counter(int gemm, unsigned* counter, bool force, const MoeLoadEstimate& e, int64_t n,
                          const GemmConfig& c) {
  if (counter == nullptr || !moe_dynamic_scheduling(gemm)) return nullptr;
  if (force) return counter;
  const double units = double(e.active) * double(ceil_div(e.rows_per_active, int64_t(c.block_m))) *
                       double(ceil_div(n, int64_t(c.block_n)));
  return units >= kDynamicMinUnitsPerCta * double(std::max(c.num_sms, 1)) ? counter : nullptr;
}

// K per tensor-core accumulation chain of GEMM1 (MoeConfig::gemm1_promote_k): the caller's, or
// automatic — 32 while GEMM1 streams weights (decode sizes: the extra FP32 adds hide behind the
// DRAM stream), 64 beyond (measured cost of 64 vs 128 at DeepSeek-V3 prefill: ~9%, perf-notes v12).
// The diagnostic knob MOEKIT_GEMM1_PROMOTE_K=32|64|128 (not API, read once) overrides both.
int gemm1_promote_k(int requested, const MoeLoadEstimate& e) {
  static const int forced = [] {
    const char* v = std::getenv("MOEKIT_GEMM1_PROMOTE_K");
    const int k = v ? std::atoi(v) : 0;
    return k == 32 || k == 64 || k == 128 ? k : 0;
  }();
  if (forced) return forced;
  if (requested) return requested;
  return e.rows_per_active <= 64 ? 32 : 64;
}

// Whether the B-multicast pairs run an expert's last 128-row block, when it holds at most 64 valid
// rows, as two N blocks of those rows (GemmParams::pair_tail_split) instead of a tile and a ghost
// tile of padding: the caller's choice (1 / 0), or automatic (-1): from 256 expected rows per
// expert. Measured on the H100 (deepseek-v3, dynamic pairs, perf-notes v27): layer −5% at T = 8192
// (256 rows per expert), −2.6% at T = 16384, but +1.7% at T = 4096 (128 rows; GEMM1 +5%). The
// diagnostic knob MOEKIT_GEMM1_TAIL_SPLIT=0|1 (not API, read once) overrides both.
bool gemm1_pair_tail_split(int requested, const MoeLoadEstimate& e) {
  static const int forced = [] {
    const char* v = std::getenv("MOEKIT_GEMM1_TAIL_SPLIT");
    return v && *v ? (v[0] == '0' ? 0 : 1) : -1;
  }();
  if (forced >= 0) return forced == 1;
  if (requested >= 0) return requested == 1;
  return e.rows_per_active >= 256;
}

}  // namespace

bool moe_gemm1_gather(int requested, int64_t num_tokens, int64_t hidden, const MoeLoadEstimate& e) {
  static const int forced = [] {
    const char* v = std::getenv("MOEKIT_GEMM1_GATHER");
    return v && *v ? (v[0] == '0' ? 1 : 2) : 0;
  }();
  const int mode = forced ? forced : requested;
  if (num_tokens * hidden >= (int64_t(1) << 32)) return false;  // 32-bit token offsets in the kernel
  if (mode == 1) return false;
  if (mode == 2) return true;
  // Automatic, from the A/B on the H100 (deepseek-v3, docs/perf-notes.md v13): the gather is
  // faster while GEMM1 runs single 64-row tiles (< 128 expected rows per expert; -4.1% at T = 1024,
  // -5.4% at T = 2048: the quantize pass writes T rows instead of T * k), slower once it runs the
  // multicast pairs (T >= 4096: +7..9% end to end, its GEMM1 slows by more than the copy saves).
  // At T = 1 it measured ~1 µs slower in v13, equal in v17 (139.2 vs 139.0-139.3 µs); its
  // token-major input lets the small-batch route + sort launch quantize too (v17).
  return e.rows_per_active < 128;
}

bool moe_dynamic_scheduling(int gemm) {
  // "0": both static; "g1" / "g2": only that GEMM dynamic; anything else (or unset): both dynamic.
  static const int mask = [] {
    const char* v = std::getenv("MOEKIT_MOE_DYNAMIC");
    if (!v || !*v) return 3;
    if (v[0] == '0') return 0;
    if (v[0] == 'g' && v[1] == '1') return 1;
    if (v[0] == 'g' && v[1] == '2') return 2;
    return 3;
  }();
  return (mask >> (gemm - 1)) & 1;
}

MoeLoadEstimate moe_expected_load(int64_t num_tokens, int top_k, int num_experts_total, int local_count) {
  MoeLoadEstimate e;
  const double slots = double(num_tokens) * double(top_k);
  if (slots <= 0 || local_count < 1 || num_experts_total < 1) return e;
  // A given expert stays empty with probability (1 - 1/E)^(T k) under uniform routing.
  const double miss = std::pow(1.0 - 1.0 / double(num_experts_total), slots);
  const double active = std::max(1.0, double(local_count) * (1.0 - miss));
  const double local_slots = slots * double(local_count) / double(num_experts_total);
  e.active = std::max<int64_t>(1, std::llround(active));
  e.rows_per_active = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(local_slots / active)));
  return e;
}

int64_t moe_prepared_w1_rows(int64_t inter) { return 2 * align_up(inter, kQuantBlock); }

void moe_gemm1_swiglu(const MoeGemm1Args& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  const int64_t n = moe_prepared_w1_rows(a.inter);
  GemmConfig c = select_moe_gemm1_config(a.rows, n, a.expected.rows_per_active, sm90::kSwigluEpilogueSmem,
                                         device_limits());
  c = config_override(knobs().moe_gemm1_config, c);  // GEMM1 keeps its 64 x 256 tile
  c.block_m = 64;
  c.block_n = 256;
  const CUtensorMap tma_h = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.hq, static_cast<uint64_t>(a.inter),
                                        static_cast<uint64_t>(a.rows), static_cast<uint64_t>(a.inter), 128, 64,
                                        CU_TENSOR_MAP_SWIZZLE_128B);
  Fp8GemmFamily family;
  family.wg_n = 2;
  family.epilogue_smem = sm90::kSwigluEpilogueSmem;
  family.tma_d = &tma_h;
  family.sb_rows = 64;  // the prepared W1 has one scale per 64 rows (gate or up of 64 h columns)
  family.b_chunk_rows = static_cast<int>(kW1ChunkRows);  // the prepared W1 is K-block tiled
  // In the layer's PDL chain the first tile is scheduled while the permute kernel runs (the offsets
  // come from moe_sort, two launches back) — unless the sort is the previous launch.
  family.pdl_early = !a.layout_from_previous;
  family.a_box_rows = decode_a_box_rows(a.expected);
  MOEKIT_REQUIRE(a.promote_k == 0 || a.promote_k == 32 || a.promote_k == 64 || a.promote_k == 128,
                 ErrorCode::kInvalidArgument, "moe_gemm1_swiglu: promote_k = ", a.promote_k,
                 " must be 0 (automatic), 32, 64 or 128");
  family.promote_k = gemm1_promote_k(a.promote_k, a.expected);
  MOEKIT_REQUIRE(a.tail_split >= -1 && a.tail_split <= 1, ErrorCode::kInvalidArgument,
                 "moe_gemm1_swiglu: tail_split = ", a.tail_split, " must be -1 (automatic), 0 or 1");
  sm90::MoeGemm1Params p{};
  p.group_offsets = a.offsets;
  p.group_counts = a.counts;
  p.num_groups = static_cast<unsigned>(a.num_experts);
  p.limit = a.limit;
  p.sa_out = a.sh;
  p.sa_out_ld = static_cast<unsigned>(sfa_ld(a.rows));
  // Dynamic scheduling: prefill sizes walk all 64-row units of an expert together (one pass) so
  // they share its B tiles. The B-multicast pairs (one pass by construction) claim units by rank
  // 0 for both CTAs.
  p.tile_counter = dynamic_counter(1, a.tile_counter, a.force_dynamic, a.expected, n, c);
  p.sched_one_pass = p.tile_counter != nullptr && a.expected.rows_per_active > 64 ? 1u : 0u;
  if (c.multicast == 2) p.pair_tail_split = gemm1_pair_tail_split(a.tail_split, a.expected) ? 1u : 0u;
  Fp8GemmOperands op{a.a,  a.hidden, a.sa, a.w1p,  a.hidden, a.sw1p, a.hq, a.inter,
                     a.rows, a.num_experts * n, n, a.hidden};
  const bool gather = a.a_tokens != nullptr;
  if (gather) {
    // The kernel addresses token rows with 32-bit byte offsets.
    MOEKIT_REQUIRE(a.num_tokens >= 1 && a.num_tokens * a.hidden < (int64_t(1) << 32) && a.top_k >= 1 && a.row_map &&
                       a.sa_tokens,
                   ErrorCode::kInvalidArgument, "moe_gemm1_swiglu: gather variant needs T * H < 2^32 (T = ",
                   a.num_tokens, ", H = ", a.hidden, "), top_k >= 1, row_map and token scales");
    p.a_gather = static_cast<const unsigned char*>(a.a_tokens);
    p.a_gather_ld = static_cast<unsigned>(a.hidden);
    p.sa_gather = a.sa_tokens;
    p.sa_gather_ld = static_cast<unsigned>(sfa_ld(a.num_tokens));
    p.row_map = a.row_map;
    p.top_k = static_cast<unsigned>(a.top_k);
    // The A TMA maps are built (and prefetched) but never loaded from.
    op.a = a.a_tokens;
    op.sa = a.sa_tokens;
    op.a_rows = a.num_tokens;
  }
  launch_fp8_gemm(c, gather ? Fp8GemmKernel::kMoeGemm1SwigluGather : Fp8GemmKernel::kMoeGemm1Swiglu, op, p, stream,
                  family);
}

void moe_gemm2_scatter(const MoeGemm2Args& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  GemmConfig c = select_moe_gemm2_config(a.expected.rows_per_active, a.expected.active, a.rows, a.hidden, a.inter,
                                         device_limits());
  c = config_override(knobs().moe_gemm2_config, c);
  Fp8GemmFamily family;
  family.epilogue_smem = 0;
  family.a_box_rows = decode_a_box_rows(a.expected);
  family.pdl_early = true;  // as GEMM1: the offsets come from moe_sort, three launches back
  // No D tensor: any valid descriptor satisfies the kernel's signature (it is only prefetched).
  const CUtensorMap tma_dummy = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.hq, static_cast<uint64_t>(a.inter),
                                            static_cast<uint64_t>(a.rows), static_cast<uint64_t>(a.inter), 16, 1,
                                            CU_TENSOR_MAP_SWIZZLE_NONE);
  family.tma_d = &tma_dummy;
  sm90::MoeGemm2Params p{};
  p.group_offsets = a.offsets;
  p.group_counts = a.counts;
  p.num_groups = static_cast<unsigned>(a.num_experts);
  p.row_map = a.row_map;
  p.row_weight = a.topk_weights;
  p.out_acc = a.y_acc;
  p.top_k = static_cast<unsigned>(a.top_k);
  // (Pairs sharing A, forced through MOEKIT_MOE_GEMM2_CONFIG, are scheduled statically: the layer
  // never picks them, so their dynamic form is left unmeasured.)
  if (c.multicast == 1) p.tile_counter = dynamic_counter(2, a.tile_counter, a.force_dynamic, a.expected, a.hidden, c);
  const Fp8GemmOperands op{a.hq, a.inter, a.sh, a.w2, a.inter, a.sw2, nullptr, a.hidden,
                           a.rows, a.num_experts * a.hidden, a.hidden, a.inter};
  launch_fp8_gemm(c, Fp8GemmKernel::kMoeGemm2Scatter, op, p, stream, family);
}

}  // namespace moekit::detail
