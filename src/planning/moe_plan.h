// Every choice one MoE forward makes, taken once on the host before anything launches: the plan.
// The forward (moe_forward.h) only executes it; MoeLayer::prepare_kernels runs the same plan, so it
// loads exactly the kernels the forward launches; `moekit bench moe --explain` prints it.
//
// A plan is a pure function of the layer's configuration, T, whether the forward routes from
// logits, the device's GEMM limits (GemmDeviceLimits: pass the H100 defaults on a machine without a
// GPU), moe_sort's scratch size and the tuning knobs (runtime/knobs.h). No CUDA call: the CPU tests
// pin it (tests/cpu/test_moe_plan.cpp). The measured reasons for each choice are in moe_plan.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "gemm/heuristic.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/gemm.h"
#include "moekit/moe_layer.h"

namespace moekit::detail {

struct Knobs;

/// Host-side load estimate for uniform routing, from T and shapes only (never a device value):
/// `active` local experts expected to receive a slot, and the rows each then gets on average.
struct MoeLoadEstimate {
  int64_t active = 1;
  int64_t rows_per_active = 1;
};
MoeLoadEstimate moe_expected_load(int64_t num_tokens, int top_k, int num_experts_total, int local_count);

/// Whether a layer of intermediate width I runs the fused pipeline on a prepared (gate/up
/// interleaved, K-block tiled) W1; else the unfused pipeline (moe_unfused.h) on a copy of W1.
bool moe_fused_layout(int64_t inter);

/// Requests that replace automatic GEMM choices: the layer's MoeConfig::gemm1_promote_k, the tuning
/// knobs' tile configurations, and the GEMM tests' hooks.
struct MoeGemmRequest {
  int promote_k = 0;           ///< GEMM1: 32, 64, 128, or 0 (automatic)
  int tail_split = -1;         ///< GEMM1 pairs' tail split: -1 automatic, 0 off, 1 on
  bool force_dynamic = false;  ///< tests: dynamic tile scheduling whatever the expected units
  std::string config;          ///< GemmConfig string replacing the heuristic's pick (empty: none)
};

/// The fused GEMM1 (+ SwiGLU + FP8 requant), moe_gemm1_swiglu.
struct MoeGemm1Plan {
  GemmConfig config;             ///< 64 x 256 tiles of the prepared W1
  int promote_k = 64;            ///< K per tensor-core accumulation chain: 32, 64 or 128
  bool pair_tail_split = false;  ///< MoeGemm1Fields::pair_tail_split (B-multicast pairs only)
  bool dynamic = false;          ///< take tiles from the tile counter (else static scheduling)
  bool one_pass = false;         ///< dynamic: walk all 64-row units of an expert together (sched_one_pass)
  int a_box_rows = 0;            ///< 8: load only a tile's valid rows (decode-sized groups); 0: BLOCK_M
  bool pdl_early = true;         ///< find the first tile before the PDL wait (layout >= two launches old)
  int mx_stages = 0;             ///< MXFP4 W1: raw slots (Fp8GemmFamily::mx_stages); 0 = FP8
  /// MXFP4 W1 on decode-sized groups: the decode GEMM (Fp8GemmFamily::mx_decode; config.block_m =
  /// tokens per tile, stages = A stages).
  bool mx_decode = false;
  bool stream_k = false;  ///< the decode GEMM in stream-K pieces (Fp8GemmFamily::stream_k)
  int k_groups = 1;       ///< the decode GEMM's K groups per tile (Fp8GemmFamily::k_groups)
};

/// GEMM2: either the scatter-add GEMM (moe_gemm2_scatter, FP32 atomics into y_acc, then finalize)
/// or bf16 rows by the grouped contiguous GEMM, then moe_combine (ordered, deterministic).
struct MoeGemm2Plan {
  bool rows_then_combine = false;
  GemmConfig config;
  bool dynamic = false;  ///< take tiles from the tile counter
  int a_box_rows = 0;    ///< scatter-add GEMM only, as MoeGemm1Plan::a_box_rows
  int mx_stages = 0;     ///< MXFP4 W2: raw slots (Fp8GemmFamily::mx_stages); 0 = FP8
  bool mx_decode = false;  ///< scatter-add GEMM on MXFP4 W2: the decode GEMM (as MoeGemm1Plan::mx_decode)
  bool stream_k = false;   ///< the decode GEMM in stream-K pieces (as MoeGemm1Plan::stream_k)
  int k_groups = 1;        ///< the decode GEMM's K groups per tile (as MoeGemm1Plan::k_groups)
};

/// Byte offsets of the forward's workspace regions (fused layout), 256-byte aligned, in carve order.
struct MoeWorkspacePlan {
  size_t expert_counts = 0, expert_offsets = 0, permuted_to_expanded = 0, expanded_to_permuted = 0;
  size_t sort_scratch = 0, sort_scratch_bytes = 0;  ///< moe_sort's scratch (its size is a plan input)
  size_t a_perm = 0, sa_perm = 0;  ///< GEMM1's activations: permuted copies, or token-major (gather)
  size_t hq = 0, sh = 0;           ///< GEMM1's FP8 output h and its scales
  size_t gemm2_out = 0;            ///< FP32 y_acc [T, H] or (rows GEMM2) bf16 rows, never both
  /// kMoeTileCounters, zeroed by every forward: GEMM1's and GEMM2's dynamic tile counters, then the
  /// stream-K flags of GEMM1's decode GEMM (kStreamKMaxCtas)
  size_t tile_counters = 0;
  /// MXFP4 layers: GEMM1's stream-K partial sums, kStreamKMaxCtas slots of 32 tokens (else 0 bytes)
  size_t stream_k_partials = 0;
  size_t token_scales = 0;         ///< [T, ceil(H/128)] token-major scales of the permute (TokenScales)
  size_t bytes = 0;                ///< total
};
constexpr int kMoeTileCounters = 2 + static_cast<int>(sm90::kStreamKMaxCtas);

/// The workspace layout of the fused forward for T tokens, given moe_sort's scratch bytes for T.
/// `mxfp4`: the layer's weights are MXFP4 (a region for the stream-K decode GEMM1's partial sums).
MoeWorkspacePlan moe_workspace_plan(int64_t num_tokens, int top_k, int64_t hidden, int64_t inter, int local_count,
                                    size_t sort_scratch_bytes, bool mxfp4 = false);

/// Every choice of one forward. Fields after `fused_layout` are meaningful in the fused layout only.
struct MoePlan {
  MoeConfig layer;           ///< the resolved configuration (local_count and routing filled in)
  int64_t num_tokens = 0;    ///< T
  bool from_logits = false;  ///< the forward routes from logits (layer.routing)
  GemmDeviceLimits limits;   ///< the device facts the GEMM configurations were chosen for

  bool fused_layout = true;  ///< false: the unfused pipeline (I % 64 != 0)
  bool route_sort = false;   ///< logits: routing and the single-CTA sort in one launch (moe_route_sort)
  bool sort_single_cta = false;   ///< moe_sort's path (when not fused with the routing): one CTA, else radix
  bool quantize_in_sort = false;  ///< the sort's launch also quantizes the tokens (gather input)
  /// The caller passes the tokens already quantized (FP8 + 1x128 scales: the expert-parallel
  /// layer's received rows); nothing quantizes here. FP8 weights: GEMM1 gathers them in place
  /// (gather, scales in the physical layout over T); MXFP4: they are copied per slot into the
  /// permuted rows (gather_rows, token-major scales).
  bool prequantized = false;
  bool gather = false;            ///< GEMM1 gathers A rows by token; false: a permuted copy per slot
  bool permute_token_scales = false;  ///< the permute stores token-major scales and gathers them by row
  MoeLoadEstimate load;           ///< expected load (uniform routing)
  int64_t rows = 0;               ///< permuted rows bound (moe_sort_rows_bound)
  MoeGemm1Plan gemm1;
  MoeGemm2Plan gemm2;
  MoeWorkspacePlan workspace;
};

/// Plans a forward of `layer` (resolved, validated) over `num_tokens` tokens. `knobs`: the tile
/// configuration overrides and (diagnostic builds) the stages MOEKIT_DIAG_SKIP leaves out.
/// `prequantized` (MoePlan::prequantized): caller ids and T · H < 2^32 only; throws
/// kInvalidArgument otherwise.
MoePlan plan_moe_forward(const MoeConfig& layer, int64_t num_tokens, bool from_logits, const GemmDeviceLimits& limits,
                         size_t sort_scratch_bytes, const Knobs& knobs, bool prequantized = false);

/// GEMM1's choices for `rows` permuted rows of intermediate width I under load `e` (also used by
/// the GEMM tests, with their requests).
MoeGemm1Plan plan_moe_gemm1(int64_t rows, int64_t inter, const MoeLoadEstimate& e, const GemmDeviceLimits& limits,
                            const MoeGemmRequest& request = {});

/// The scatter-add GEMM2's choices (tail_split and promote_k of `request` do not apply).
MoeGemm2Plan plan_moe_gemm2_scatter(int64_t rows, int64_t hidden, int64_t inter, const MoeLoadEstimate& e,
                                    const GemmDeviceLimits& limits, const MoeGemmRequest& request = {});

/// Rows of the prepared W1 per expert: gate and up interleaved by 64 rows, I padded to 128.
int64_t moe_prepared_w1_rows(int64_t inter);

/// The plan as readable text, one "name value" line per choice (moekit bench moe --explain).
std::string describe_moe_plan(const MoePlan& plan);

}  // namespace moekit::detail
