// The MoE forward's plan (moe_plan.h): every decision, with the measurements behind it.
#include "planning/moe_plan.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moe/moe_stage_trace.h"
#include "moe/moe_sort_internal.h"
#include "moe/route_sort.h"
#include "moekit/moe_sort.h"
#include "moekit/numerics.h"
#include "runtime/knobs.h"

namespace moekit::detail {
namespace {

// Largest FP32 accumulator y_acc [T, H] for which GEMM2 scatter-adds (a third of the H100's L2).
// Past it the atomics miss to DRAM (measured at T = 16384: 176 M reduction sectors, GEMM2 8.6 ms)
// and bf16 rows + the ordered combine move fewer bytes.
constexpr int64_t kScatterAccBytesMax = int64_t(16) << 20;

// The permute stores each token's scales once and gathers them by row (TokenScales) from 2^19
// per-slot scale stores (T * k * ceil(H / 128)) on. Measured on the H100 (docs/performance.md §Token scales in the permute), permute
// stage us, per-slot → gathered: deepseek-v3 T = 4096 (1.8 M stores) 142 → 114, T = 16384 (7.3 M)
// 584 → 463; gpt-oss-120b T = 16384 (1.5 M) 123 → 110, T = 4096 (0.38 M) 32 → 32; mixtral-8x7b
// T = 4096 (0.26 M) 30 → 33, T = 2048 17 → 20 (the second launch costs more than it saves there).
bool token_scales_pay(int64_t num_tokens, int top_k, int64_t hidden) {
  return num_tokens * top_k * ceil_div(hidden, kQuantBlock) >= (int64_t{1} << 19);
}

// GEMM1's activations: quantized once per token either way; then either permuted copies (one per
// slot, TMA tiles) or the tokens in place, gathered row by row by GEMM1. `requested` is
// MoeConfig::gemm1_input; the gather needs T * H < 2^32 (32-bit token offsets in the kernel).
// Automatic, from the A/B on the H100 (deepseek-v3, docs/performance.md §Gather vs permute): the gather is faster
// while GEMM1 runs single 64-row tiles (< 128 expected rows per expert; -4.1% at T = 1024, -5.4% at
// T = 2048: the quantize pass writes T rows instead of T * k), slower once it runs the multicast
// pairs (T >= 4096: +7..9% end to end, its GEMM1 slows by more than the copy saves). At T = 1 it
// measured ~1 µs slower in an earlier build, then equal (139.2 vs 139.0-139.3 µs); its token-major
// input lets the small-batch route + sort launch quantize too (docs/performance.md §Fused route,
// sort and quantize at small T).
bool gemm1_gathers(MoeGemm1Input requested, int64_t num_tokens, int64_t hidden, const MoeLoadEstimate& e) {
  if (num_tokens < 1 || num_tokens * hidden >= (int64_t(1) << 32)) return false;
  if (requested == MoeGemm1Input::kPermuted) return false;
  if (requested == MoeGemm1Input::kGathered) return true;
  return e.rows_per_active < 128;
}

// Decode-sized groups (well under a 64-row tile): load A in 8-row boxes, only the valid rows —
// a 64-row box reads up to 63 padding rows per tile (measured at T = 64: GEMM1 read 7.15 GB from
// DRAM for 6.4 GB of W1).
int decode_a_box_rows(const MoeLoadEstimate& e) { return e.rows_per_active <= 32 ? 8 : 0; }

// Dynamic tile scheduling pays once the CTAs have enough units to rebalance: measured on the H100
// (deepseek-v3, docs/performance.md §Dynamic tile scheduling) it cost 4 µs at T = 1 in GEMM2 (~3.9 units per CTA) and
// 7 µs at T = 4 in GEMM1 (~3.8), was neutral at ~2 and ~7-8, and gained from ~16 per CTA up.
constexpr double kDynamicMinUnitsPerCta = 6.0;

// Whether a MoE GEMM of N = n with tiles `c` takes its tiles dynamically: forced (tests), or the
// expected units (active experts x M units x N blocks) are enough per CTA.
bool dynamic_pays(bool force, const MoeLoadEstimate& e, int64_t n, const GemmConfig& c) {
  if (force) return true;
  const double units = double(e.active) * double(ceil_div(e.rows_per_active, int64_t(c.block_m))) *
                       double(ceil_div(n, int64_t(c.block_n)));
  return units >= kDynamicMinUnitsPerCta * double(std::max(c.num_sms, 1));
}

// K per tensor-core accumulation chain of GEMM1 (MoeConfig::gemm1_promote_k): the caller's, or
// automatic — 32 while GEMM1 streams weights (decode sizes: the extra FP32 adds hide behind the
// DRAM stream), 64 beyond (measured cost of 64 vs 128 at DeepSeek-V3 prefill: ~9%, docs/performance.md §GEMM1 accumulation chains).
int gemm1_promote_k(int requested, const MoeLoadEstimate& e) {
  if (requested) return requested;
  return e.rows_per_active <= 64 ? 32 : 64;
}

// Whether the B-multicast pairs run an expert's last 128-row block, when it holds at most 64 valid
// rows, as two N blocks of those rows (MoeGemm1Fields::pair_tail_split) instead of a tile and a ghost
// tile of padding: the caller's choice (1 / 0), or automatic (-1): from 256 expected rows per
// expert. Measured on the H100 (deepseek-v3, dynamic pairs, docs/performance.md §Pair tail split): layer −5% at T = 8192
// (256 rows per expert), −2.6% at T = 16384, but +1.7% at T = 4096 (128 rows; GEMM1 +5%).
bool gemm1_pair_tail_split(int requested, const MoeLoadEstimate& e) {
  if (requested >= 0) return requested == 1;
  return e.rows_per_active >= 256;
}

// Lays out 256-byte aligned regions from offset 0 (as WorkspaceCarver, in offsets).
struct OffsetCarver {
  size_t used = 0;
  size_t take(int64_t count, size_t elem_bytes) {
    used = (used + 255) / 256 * 256;
    const size_t at = used;
    used += static_cast<size_t>(std::max<int64_t>(count, 0)) * elem_bytes;
    return at;
  }
};

// The MXFP4 decode GEMMs (kernels/sm90/mxfp4_decode_gemm.cuh) while an expert's tokens fit one
// or two of their tiles: tokens per tile from the expected rows (room for the busiest experts:
// the MMA's N costs little, a second tile re-reads the expert's weights); GEMM1 on 256 prepared
// rows (the 1x128 block of h); GEMM2 on 256 rows where that still gives every SM a tile, else
// 128 (measured, H100, GEMM2 us 128 → 256 rows: deepseek-v3 T = 1 47.6 → 42.0 (224 tiles),
// T = 64 867 → 728; gpt-oss-120b T = 1 23.3 → 31.3 (48 tiles)); one ring of as many raw slots
// with their A stages as fit.
constexpr int64_t kMxDecodeMaxRowsPerExpert = 16;

int mx_decode_tokens(int64_t rows_per_active) {
  return rows_per_active <= 2 ? 8 : rows_per_active <= 5 ? 16 : 32;  // (tiles divide the 128-row segments)
}

// MXFP4 weights: the expansion GEMMs read the permuted copy; the decode GEMM1 on 8-token tiles
// reads the token rows instead (MxDecodeTraits::kGatherA) when MoeConfig::gemm1_input asks for it,
// with the tokens quantized in the sort's launch (plan_moe_forward). Not by default: that launch
// is then the previous one, so GEMM1 finds its first tile only after it, where behind the permute
// kernel it does so while that runs (H100, layer µs, permuted -> gathered, two rounds: gpt-oss-120b
// T = 1 45.7 -> 47.8, T = 8 175.3 -> 179.5; deepseek-v3 T = 1 92.1 -> 90.3, T = 8 471.2 -> 474.8;
// docs/mxfp4.md §Gathered tokens). Not where MOEKIT_MXFP4_STREAM_K asks for GEMM1 in pieces
// either: their partial sums use the gather's parameter fields.
bool mx_decode_gathers(const MoeConfig& layer, int64_t t, const MoeLoadEstimate& e, const Knobs& knobs) {
  const bool gemm1_pieces = knobs.mxfp4_stream_k >= 0 && (knobs.mxfp4_stream_k & 1) != 0 && !layer.deterministic;
  return layer.gemm1_input == MoeGemm1Input::kGathered && knobs.mxfp4_decode && !gemm1_pieces &&
         e.rows_per_active <= kMxDecodeMaxRowsPerExpert && mx_decode_tokens(e.rows_per_active) == 8 &&
         gemm1_gathers(layer.gemm1_input, t, layer.hidden, e);
}

// Ring slots (a raw slot and an A stage each) of a decode configuration with `k_groups` K groups
// in the device's shared memory, at most `most` (0: none fit).
// Two K groups take a tile's K blocks alternately from one ring, so an even ring keeps each slot
// with one group inside a tile (an odd one hands a slot from group to group, and a group could test
// its slot's barrier a phase early while the other group's copy into it is still in flight).
int mx_decode_ring_slots(const GemmConfig& c, unsigned epilogue_smem, int sb_rows, int most, int k_groups,
                         const GemmDeviceLimits& limits) {
  for (int n = std::min(most, 16); n >= 2; --n)
    if ((k_groups == 1 || n % 2 == 0) &&
        sm90::gemm_mx_decode_smem_bytes(epilogue_smem, c.block_m, c.block_n, sb_rows, n, n, k_groups) <=
            limits.smem_bytes)
      return n;
  return 0;
}

// One decode GEMM's configuration, or nothing when no ring fits. `forced`: a tuning knob's
// configuration (MOEKIT_MOE_GEMM1_CONFIG / MOEKIT_MOE_GEMM2_CONFIG) with BLOCK_M < 64 whose
// tokens, rows and stages (the ring's most slots) replace the plan's. `k_groups`: 2 asks for two
// K groups, which the configuration gets where its tiles can run them (8 tokens), else 1.
bool mx_decode_config(int tokens, int rows, unsigned epilogue_smem, int sb_rows, const std::string& forced,
                      const GemmDeviceLimits& limits, GemmConfig& c, int& slots, int& k_groups) {
  c = GemmConfig{};
  c.block_m = tokens;
  c.block_n = rows;
  c.multicast = 1;
  c.raster_group = 8;
  c.num_sms = limits.num_sms;
  int most = 16;
  if (!forced.empty()) {
    const GemmConfig f = GemmConfig::parse(forced);
    if (sm90::gemm_mx_decode_supported(f.block_m, f.block_n) && f.stages >= 2) {
      c.block_m = f.block_m;
      c.block_n = f.block_n;
      most = f.stages;
    }
  }
  if (!sm90::gemm_mx_decode_k_groups_supported(c.block_m, k_groups)) k_groups = 1;
  slots = mx_decode_ring_slots(c, epilogue_smem ? sm90::gemm_mx_decode_swiglu_smem(c.block_m) : 0u, sb_rows, most,
                               k_groups, limits);
  c.stages = slots;
  return slots > 0;
}

void plan_mx_decode(MoePlan& p, const GemmDeviceLimits& limits, const Knobs& knobs) {
  const int tokens = mx_decode_tokens(p.load.rows_per_active);
  // Stream-K pieces (kernels/sm90/scheduler_stream_k.cuh; every CTA runs the same number of K
  // blocks) where the scheduler can count the experts and the workspace has a slot per CTA. The
  // plan's choice (H100, layer µs, docs/mxfp4.md §Stream-K decode GEMMs): GEMM2 while its
  // 256-row tiles make at most four waves (gpt-oss-120b T = 1 / 8: GEMM2 20.4 → 18.4, 65.6 → 59.8;
  // deepseek-v3 T = 1 equal; T = 64, ten waves: 207 → 224, where dynamic whole tiles balance
  // better); GEMM1 keeps whole tiles (stream-K measured slower at T = 1: gpt-oss-120b 27.3 → 30.9,
  // deepseek-v3 57.2 → 68.8; and at T = 64) and runs them only under MOEKIT_MXFP4_STREAM_K.
  const bool sk_fits = p.layer.local_count <= int(sm90::kStreamKMaxGroups) && limits.num_sms <= int(sm90::kStreamKMaxCtas);
  const int64_t tiles2 = p.load.active * ceil_div(p.layer.hidden, int64_t(256)) *
                         ceil_div(p.load.rows_per_active, int64_t(tokens));
  const int sk_mask = knobs.mxfp4_stream_k >= 0 ? knobs.mxfp4_stream_k : tiles2 <= 4 * limits.num_sms ? 2 : 0;
  const bool stream_k = sk_fits && (sk_mask & 1) != 0, stream_k2 = sk_fits && (sk_mask & 2) != 0;
  // Two K groups per 8-token tile (MxDecodeTraits::kKGroups) where the GEMM's bit is set; the
  // plan's: GEMM1's (H100, layer µs, one K group -> two on GEMM1 -> both, docs/mxfp4.md §K groups:
  // gpt-oss-120b T = 1 48.1 -> 45.4 -> 45.1, T = 8 180.2 -> 176.8 -> 175.7; deepseek-v3 T = 1
  // 92.9 -> 91.0 -> 91.7; GEMM2's stage alone moved within ±0.5 µs).
  const int kg_mask = knobs.mxfp4_k_groups >= 0 ? knobs.mxfp4_k_groups : 1;
  GemmConfig c;
  int slots = 0;
  // The deterministic layer keeps one K group: its GEMM1 sums each K block in the FP8 form's order.
  int k_groups = (kg_mask & 1) != 0 && !p.layer.deterministic ? 2 : 1;
  if (mx_decode_config(tokens, 256, 1, 64, knobs.moe_gemm1_config, limits, c, slots, k_groups) && c.block_n == 256) {
    p.gemm1.config = c;
    p.gemm1.mx_stages = slots;
    p.gemm1.mx_decode = true;
    // The deterministic layer keeps whole tiles: its GEMM1 then sums each K block in the FP8 layer's
    // order, so the MXFP4 layer equals its FP8 form bit for bit (a stream-K owner adds its helpers'
    // partial sums, a different FP32 rounding; deterministic too, but not that form's).
    p.gemm1.stream_k = stream_k && !p.layer.deterministic && !p.gather;  // (sk_partials share a_gather's field)
    p.gemm1.k_groups = k_groups;
    p.gemm1.dynamic = !p.gemm1.stream_k && dynamic_pays(false, p.load, moe_prepared_w1_rows(p.layer.inter), c);
    p.gemm1.one_pass = false;
  }
  if (p.gemm2.rows_then_combine) return;
  // Whole tiles: 256 rows while every SM still gets one. Stream-K: 256 (more MMA tiles per warp).
  const int rows2 =
      stream_k2 || p.load.active * ceil_div(p.layer.hidden, int64_t(256)) >= limits.num_sms ? 256 : 128;
  k_groups = (kg_mask & 2) != 0 ? 2 : 1;
  if (mx_decode_config(tokens, rows2, 0, 128, knobs.moe_gemm2_config, limits, c, slots, k_groups)) {
    p.gemm2.config = c;
    p.gemm2.mx_stages = slots;
    p.gemm2.mx_decode = true;
    p.gemm2.stream_k = stream_k2;
    p.gemm2.k_groups = k_groups;
    p.gemm2.dynamic = !stream_k2 && dynamic_pays(false, p.load, p.layer.hidden, c);
  }
}

// MXFP4 weights (kernels/sm90/mxfp4_loader.cuh): the FP8 plan's tiles as single CTAs (GEMM1 in
// B-sharing pairs from kMxfp4PairRows rows per expert) with widths in whole 32-row sub-chunks; two
// expanded stages while the GEMMs stream weights (the raw slots keep the DRAM reads in flight: raw
// bytes are a quarter of an expanded stage's B), three beyond.
// GEMM1's automatic chains are 64 long at decode sizes too: a K block streams in half the FP8
// time, and 32-long chains measured slower (deepseek-v3 GEMM1, H100: T = 64 1555 → 1433 µs,
// T = 1 72.4 → 66.2 µs; 128: 1589 and 68.9 µs; docs/mxfp4.md §Expansion GEMMs).
constexpr int64_t kMxfp4PairRows = 512;

void plan_mxfp4_gemms(MoePlan& p, const GemmDeviceLimits& limits, const Knobs& knobs) {
  const int stages = p.load.rows_per_active <= 64 ? 2 : 3;
  if (p.layer.gemm1_promote_k == 0) p.gemm1.promote_k = 64;
  // GEMM1 in B-sharing pairs (each CTA expands half of the B tile, mxfp4_loader.cuh) from 512 rows
  // per expert; below, single CTAs. Measured (H100, GEMM1 stage µs, two rounds, single CTAs /
  // pairs, docs/mxfp4.md §Prefill): deepseek-v3 T = 16384 (512 rows) 13505, 13343 / 12828,
  // 13036; T = 4096 (128 rows) 3922, 3925 / 4069, 4040; gpt-oss-120b T = 8192 (256 rows) 2493,
  // 2483 / 2537, 2532.
  if (p.load.rows_per_active < kMxfp4PairRows) p.gemm1.config.multicast = 1;
  p.gemm2.config.multicast = 1;  // (pairs run only GEMM1's body)
  p.gemm1.mx_stages = fit_mxfp4_stages(p.gemm1.config, sm90::kSwigluEpilogueSmem, stages, limits);
  p.gemm1.pair_tail_split = false;
  p.gemm2.mx_stages =
      fit_mxfp4_stages(p.gemm2.config, p.gemm2.rows_then_combine ? ~0u : 0u, stages, limits);
  if (knobs.mxfp4_decode && p.load.rows_per_active <= kMxDecodeMaxRowsPerExpert) plan_mx_decode(p, limits, knobs);
}

}  // namespace

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

bool moe_fused_layout(int64_t inter) { return inter % 64 == 0; }

int64_t moe_prepared_w1_rows(int64_t inter) { return 2 * align_up(inter, kQuantBlock); }

MoeWorkspacePlan moe_workspace_plan(int64_t t, int k, int64_t h, int64_t inter, int local_count,
                                    size_t sort_scratch_bytes, bool mxfp4) {
  MoeWorkspacePlan w;
  OffsetCarver c;
  const int64_t rows = moe_sort_rows_bound(t, k, local_count);
  // The sort's regions first, in the order of take_sort_regions (workspace_carver.h).
  w.expert_counts = c.take(local_count, 4);
  w.expert_offsets = c.take(local_count + 1, 4);
  w.permuted_to_expanded = c.take(rows, 4);
  w.expanded_to_permuted = c.take(std::max<int64_t>(t * k, 1), 4);
  w.sort_scratch_bytes = sort_scratch_bytes;
  w.sort_scratch = c.take(static_cast<int64_t>(sort_scratch_bytes), 1);
  w.a_perm = c.take(rows * h, 1);
  w.sa_perm = c.take(sfa_physical_size(rows, h), sizeof(float));
  w.hq = c.take(rows * inter, 1);
  w.sh = c.take(sfa_physical_size(rows, inter), sizeof(float));
  w.gemm2_out = c.take(std::max<int64_t>(t * h * 4, rows * h * 2), 1);
  w.tile_counters = c.take(kMoeTileCounters, sizeof(unsigned));
  w.stream_k_partials =
      c.take(mxfp4 ? int64_t(sm90::kStreamKMaxCtas) * sm90::gemm_stream_k_slot_floats(32) : 0, sizeof(float));
  w.token_scales = c.take(t * ceil_div(h, kQuantBlock), sizeof(float));
  w.bytes = c.used;
  return w;
}

MoeGemm1Plan plan_moe_gemm1(int64_t rows, int64_t inter, const MoeLoadEstimate& e, const GemmDeviceLimits& limits,
                            const MoeGemmRequest& r) {
  MOEKIT_REQUIRE(r.promote_k == 0 || r.promote_k == 32 || r.promote_k == 64 || r.promote_k == 128,
                 ErrorCode::kInvalidArgument, "moe_gemm1_swiglu: promote_k = ", r.promote_k,
                 " must be 0 (automatic), 32, 64 or 128");
  MOEKIT_REQUIRE(r.tail_split >= -1 && r.tail_split <= 1, ErrorCode::kInvalidArgument,
                 "moe_gemm1_swiglu: tail_split = ", r.tail_split, " must be -1 (automatic), 0 or 1");
  const int64_t n = moe_prepared_w1_rows(inter);
  MoeGemm1Plan p;
  p.config = select_moe_gemm1_config(rows, n, e.rows_per_active, sm90::kSwigluEpilogueSmem, limits);
  if (!r.config.empty()) p.config = GemmConfig::parse(r.config);
  p.config.block_m = 64;  // a forced configuration keeps GEMM1's 64 x 256 tile
  p.config.block_n = 256;
  p.promote_k = gemm1_promote_k(r.promote_k, e);
  p.pair_tail_split = p.config.multicast == 2 && gemm1_pair_tail_split(r.tail_split, e);
  p.dynamic = dynamic_pays(r.force_dynamic, e, n, p.config);
  // Prefill sizes walk all 64-row units of an expert together (one pass) so they share its B tiles.
  p.one_pass = p.dynamic && e.rows_per_active > 64;
  p.a_box_rows = decode_a_box_rows(e);
  return p;
}

MoeGemm2Plan plan_moe_gemm2_scatter(int64_t rows, int64_t hidden, int64_t inter, const MoeLoadEstimate& e,
                                    const GemmDeviceLimits& limits, const MoeGemmRequest& r) {
  MoeGemm2Plan p;
  p.config = select_moe_gemm2_config(e.rows_per_active, e.active, rows, hidden, inter, limits);
  // (A configuration of fewer than 64 rows names the MXFP4 decode GEMM's tiles: plan_mx_decode.)
  if (!r.config.empty() && GemmConfig::parse(r.config).block_m >= 64) p.config = GemmConfig::parse(r.config);
  // Pairs sharing A, forced through MOEKIT_MOE_GEMM2_CONFIG, are scheduled statically: the layer
  // never picks them, so their dynamic form is left unmeasured.
  p.dynamic = p.config.multicast == 1 && dynamic_pays(r.force_dynamic, e, hidden, p.config);
  p.a_box_rows = decode_a_box_rows(e);
  return p;
}

MoePlan plan_moe_forward(const MoeConfig& layer, int64_t num_tokens, bool from_logits, const GemmDeviceLimits& limits,
                         size_t sort_scratch_bytes, const Knobs& knobs, bool prequantized) {
  MoePlan p;
  p.layer = layer;
  p.num_tokens = num_tokens;
  p.from_logits = from_logits && layer.routing.has_value();
  p.limits = limits;
  p.fused_layout = moe_fused_layout(layer.inter);
  MOEKIT_REQUIRE(!prequantized || p.fused_layout, ErrorCode::kInvalidArgument,
                 "moekit: pre-quantized tokens need the fused pipeline (I a multiple of 64), I = ", layer.inter);
  if (!p.fused_layout || num_tokens < 1) return p;
  const int64_t t = num_tokens;
  const int k = layer.top_k, local = layer.local_count;
  const auto skip = [&](const char* stage) { return moe_diag_skip(knobs.diag_skip, stage); };
  p.load = moe_expected_load(t, k, layer.num_experts, local);
  p.rows = moe_sort_rows_bound(t, k, local);
  // MXFP4 weights: the expansion GEMMs' producer warps expand them, so GEMM1 reads the permuted copy,
  // except the decode GEMM1 on 8-token tiles (mx_decode_gathers).
  const bool mx = layer.weight_format == MoeWeightFormat::kMxfp4;
  p.gather = mx ? mx_decode_gathers(layer, t, p.load, knobs) : gemm1_gathers(layer.gemm1_input, t, layer.hidden, p.load);
  if (prequantized) {  // FP8 weights: GEMM1 reads the rows where they are; MXFP4: copied per slot
    MOEKIT_REQUIRE(!p.from_logits && t * layer.hidden < (int64_t(1) << 32), ErrorCode::kInvalidArgument,
                   "moekit: pre-quantized tokens need caller-routed ids and T * H < 2^32 (T = ", t, ", H = ",
                   layer.hidden, ")");
    p.prequantized = true;
    p.gather = !mx;
  }
  // Routing and sort in one launch for small batches (route_sort.cu has the measurements); with
  // the gather variant that launch, or the single-CTA sort of callers' ids, quantizes the tokens
  // too: the quantize kernel's launch and PDL edge measured ~6 µs of the deepseek-v3 layer at T = 1
  // (docs/performance.md §Fused route, sort and quantize at small T).
  p.route_sort = p.from_logits && !skip("route") && moe_route_sort_applies(*layer.routing, t, local);
  if (p.route_sort) {
    p.quantize_in_sort = p.gather && !skip("permute_quant");
  } else {
    p.sort_single_cta = moe_sort_single_cta(t, k, local);
    p.quantize_in_sort = p.gather && !p.prequantized && moe_sort_quantize_applies(t, k, local) &&
                         !skip("sort") && !skip("permute_quant");
  }
  // MXFP4 gathers only where the sort's launch quantizes the tokens.
  if (mx && !p.prequantized && !p.quantize_in_sort) p.gather = false;
  p.permute_token_scales = !p.gather && !p.prequantized && token_scales_pay(t, k, layer.hidden);

  MoeGemmRequest g1;
  g1.promote_k = layer.gemm1_promote_k;
  g1.config = knobs.moe_gemm1_config;
  p.gemm1 = plan_moe_gemm1(p.rows, layer.inter, p.load, limits, g1);
  // In the PDL chain GEMM1 finds its first tile while the permute runs (the group layout comes
  // from the sort, two launches back) — unless the sort is the previous launch.
  p.gemm1.pdl_early = !p.quantize_in_sort;

  if (layer.deterministic || t * layer.hidden * 4 > kScatterAccBytesMax) {
    p.gemm2.rows_then_combine = true;
    p.gemm2.dynamic = true;
    p.gemm2.config = select_grouped_contiguous_config(p.rows, local, layer.hidden, layer.inter, p.gemm2.dynamic,
                                                      limits, knobs.grouped_config);
  } else {
    MoeGemmRequest g2;
    g2.config = knobs.moe_gemm2_config;
    p.gemm2 = plan_moe_gemm2_scatter(p.rows, layer.hidden, layer.inter, p.load, limits, g2);
  }
  if (mx) plan_mxfp4_gemms(p, limits, knobs);
  if (mx && p.gather && !(p.gemm1.mx_decode && p.gemm1.config.block_m == 8)) {  // a forced configuration
    p.gather = p.quantize_in_sort = false;
    p.gemm1.pdl_early = true;
    p.permute_token_scales = token_scales_pay(t, k, layer.hidden);
  }
  p.workspace = moe_workspace_plan(t, k, layer.hidden, layer.inter, local, sort_scratch_bytes, mx);
  return p;
}

}  // namespace moekit::detail
