#include "moe/moe_gemm.h"

#include "common/check.h"
#include "gemm/gemm_launch.h"
#include "kernels/sm90/fp8_gemm_layout.cuh"
#include "moekit/numerics.h"

namespace moekit::detail {
namespace {

// The contiguous expert layout (moe_sort's offsets and counts) both MoE GEMMs are scheduled over.
void set_expert_layout(sm90::GroupedLayoutParams& p, const int32_t* offsets, const int32_t* counts, int experts) {
  p.group_offsets = offsets;
  p.group_counts = counts;
  p.num_groups = static_cast<unsigned>(experts);
}

}  // namespace

MoeGemmKernel moe_gemm1_kernel(const MoeGemm1Plan& plan, bool gather) {
  MoeGemmKernel k{plan.config, plan.mx_stages ? Fp8GemmKernel::kMoeGemm1SwigluMxfp4
                               : gather       ? Fp8GemmKernel::kMoeGemm1SwigluGather
                                              : Fp8GemmKernel::kMoeGemm1Swiglu,
                  {}};
  Fp8GemmFamily& family = k.family;
  family.wg_n = 2;
  family.epilogue_smem = sm90::kSwigluEpilogueSmem;
  family.sb_rows = 64;  // the prepared W1 has one scale per 64 rows (gate or up of 64 h columns)
  family.b_chunk_rows = static_cast<int>(kW1ChunkRows);  // the prepared W1 is K-block tiled
  family.pdl_early = plan.pdl_early;
  family.a_box_rows = plan.a_box_rows;
  family.promote_k = plan.promote_k;
  family.mx_stages = plan.mx_stages;  // MXFP4 W1 (moe_prepare_w1_mxfp4's sub-chunks)
  MOEKIT_REQUIRE(!(gather && family.mx_stages) || (plan.mx_decode && plan.config.block_m == 8 && !plan.stream_k),
                 ErrorCode::kInvalidArgument,
                 "moe_gemm1_swiglu: MXFP4 W1 runs on the permuted activations, except the decode GEMM on 8-token "
                 "tiles in whole tiles, which may gather");
  if (plan.mx_decode) {  // tokens x 256 prepared rows, A boxes of the tile's tokens (or of one row each)
    k.kernel = Fp8GemmKernel::kMoeGemm1SwigluMxfp4Decode;
    family.mx_decode = true;
    family.epilogue_smem = sm90::gemm_mx_decode_swiglu_smem(plan.config.block_m);
    family.a_box_rows = gather ? 1 : 0;
    family.a_gather = gather;
    family.stream_k = plan.stream_k;
    family.k_groups = plan.k_groups;
  }
  return k;
}

MoeGemmKernel moe_gemm2_kernel(const MoeGemm2Plan& plan) {
  MoeGemmKernel k{plan.config, {}, {}};
  Fp8GemmFamily& family = k.family;
  family.mx_stages = plan.mx_stages;  // MXFP4 W2 (moe_prepare_w2_mxfp4's sub-chunks)
  if (plan.rows_then_combine) {  // the grouped contiguous GEMM's bf16 body (grouped_gemm.cpp)
    k.kernel = plan.mx_stages ? Fp8GemmKernel::kContiguousMxfp4 : Fp8GemmKernel::kContiguous;
    family.b_evict_first = false;
    return k;
  }
  k.kernel = plan.mx_decode   ? Fp8GemmKernel::kMoeGemm2ScatterMxfp4Decode
             : plan.mx_stages ? Fp8GemmKernel::kMoeGemm2ScatterMxfp4
                              : Fp8GemmKernel::kMoeGemm2Scatter;
  family.mx_decode = plan.mx_decode;
  family.stream_k = plan.mx_decode && plan.stream_k;
  family.k_groups = plan.mx_decode ? plan.k_groups : 1;
  family.epilogue_smem = 0;
  family.a_box_rows = plan.mx_decode ? 0 : plan.a_box_rows;
  family.pdl_early = true;  // as GEMM1: the offsets come from moe_sort, three launches back
  return k;
}

std::vector<std::pair<std::string, std::string>> moe_gemm_kernel_sources(const MoePlan& plan) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!plan.fused_layout || plan.num_tokens < 1) return out;
  for (const MoeGemmKernel& k : {moe_gemm1_kernel(plan.gemm1, plan.gather), moe_gemm2_kernel(plan.gemm2)}) {
    std::string entry;
    std::string source = fp8_gemm_kernel_source(k.config, k.kernel, &entry, k.family);
    out.emplace_back(std::move(entry), std::move(source));
  }
  return out;
}

void moe_gemm1_swiglu(const MoeGemm1Args& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  const int64_t n = moe_prepared_w1_rows(a.inter);
  const bool gather = a.a_tokens != nullptr;
  const MoeGemmKernel k = moe_gemm1_kernel(a.plan, gather);
  const GemmConfig& c = k.config;
  const CUtensorMap tma_h = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.hq, static_cast<uint64_t>(a.inter),
                                        static_cast<uint64_t>(a.rows), static_cast<uint64_t>(a.inter), 128,
                                        a.plan.mx_decode ? a.plan.config.block_m : 64, CU_TENSOR_MAP_SWIZZLE_128B);
  Fp8GemmFamily family = k.family;
  family.tma_d = &tma_h;
  sm90::MoeGemm1Params p{};
  set_expert_layout(p, a.offsets, a.counts, a.num_experts);
  p.limit = a.limit;
  p.b1 = a.b1;
  p.b1_inter = static_cast<unsigned>(a.inter);
  p.gpt_oss = a.gpt_oss ? 1u : 0u;
  p.alpha = a.alpha;
  p.sa_out = a.sh;
  p.sa_out_ld = static_cast<unsigned>(sfa_ld(a.rows));
  // The B-multicast pairs (one pass by construction) claim units by rank 0 for both CTAs.
  p.tile_counter = a.plan.dynamic ? a.tile_counter : nullptr;
  p.sched_one_pass = p.tile_counter != nullptr && a.plan.one_pass ? 1u : 0u;
  // MXFP4 pairs expand half of B each, so a tile of its own (the split tail) could not get all of it.
  MOEKIT_REQUIRE(!(c.multicast == 2 && family.mx_stages && a.plan.pair_tail_split), ErrorCode::kInvalidArgument,
                 "moe_gemm1_swiglu: MXFP4 B-sharing pairs do not split tail blocks (plan.pair_tail_split)");
  if (c.multicast == 2) p.pair_tail_split = a.plan.pair_tail_split ? 1u : 0u;
  if (family.stream_k) {
    MOEKIT_REQUIRE(a.sk_partials && a.sk_flags && c.num_sms <= int(sm90::kStreamKMaxCtas) &&
                       a.num_experts <= int(sm90::kStreamKMaxGroups),
                   ErrorCode::kInvalidArgument, "moe_gemm1_swiglu: the stream-K decode GEMM needs partial-sum slots and zeroed ",
                   "flags for ", c.num_sms, " CTAs (at most ", sm90::kStreamKMaxCtas, ") and at most ",
                   sm90::kStreamKMaxGroups, " experts (", a.num_experts, ")");
    p.sk_partials = a.sk_partials;
    p.sk_flags = a.sk_flags;
  }
  Fp8GemmOperands op{a.a,  a.hidden, a.sa, a.w1p,  a.hidden, a.sw1p, a.hq, a.inter,
                     a.rows, a.num_experts * n, n, a.hidden};
  if (gather) {
    // The kernel addresses token rows with 32-bit byte offsets.
    MOEKIT_REQUIRE(a.num_tokens >= 1 && a.num_tokens * a.hidden < (int64_t(1) << 32) && a.top_k >= 1 && a.row_map &&
                       a.sa_tokens,
                   ErrorCode::kInvalidArgument, "moe_gemm1_swiglu: gather variant needs T * H < 2^32 (T = ",
                   a.num_tokens, ", H = ", a.hidden, "), top_k >= 1, row_map and token scales");
    // The MXFP4 decode GEMM copies each token's scales in 16-byte pieces.
    MOEKIT_REQUIRE(!family.a_gather || reinterpret_cast<uintptr_t>(a.sa_tokens) % 16 == 0, ErrorCode::kInvalidArgument,
                   "moe_gemm1_swiglu: the gathered token scales must be 16-byte aligned");
    p.a_gather = static_cast<const unsigned char*>(a.a_tokens);
    p.a_gather_ld = static_cast<unsigned>(a.hidden);
    p.sa_gather = a.sa_tokens;
    p.sa_gather_ld = static_cast<unsigned>(sfa_ld(a.num_tokens));
    p.row_map = a.row_map;
    p.top_k = static_cast<unsigned>(a.top_k);
    // The A TMA maps cover the token rows: the FP8 bodies never load from them (cp.async gather),
    // the MXFP4 decode GEMM1 loads one-row boxes.
    op.a = a.a_tokens;
    op.sa = a.sa_tokens;
    op.a_rows = a.num_tokens;
  }
  launch_fp8_gemm(c, k.kernel, op, p, stream, family);
}

void moe_gemm2_scatter(const MoeGemm2Args& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  const MoeGemmKernel k = moe_gemm2_kernel(a.plan);
  const GemmConfig& c = k.config;
  Fp8GemmFamily family = k.family;
  // No D tensor: any valid descriptor satisfies the kernel's signature (it is only prefetched).
  const CUtensorMap tma_dummy = make_tma_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.hq, static_cast<uint64_t>(a.inter),
                                            static_cast<uint64_t>(a.rows), static_cast<uint64_t>(a.inter), 16, 1,
                                            CU_TENSOR_MAP_SWIZZLE_NONE);
  family.tma_d = &tma_dummy;
  sm90::MoeGemm2Params p{};
  set_expert_layout(p, a.offsets, a.counts, a.num_experts);
  p.row_map = a.row_map;
  p.row_weight = a.topk_weights;
  p.out_acc = a.y_acc;
  p.top_k = static_cast<unsigned>(a.top_k);
  p.b2 = a.b2;
  if (a.plan.dynamic) p.tile_counter = a.tile_counter;
  MOEKIT_REQUIRE(!family.stream_k || a.num_experts <= int(sm90::kStreamKMaxGroups), ErrorCode::kInvalidArgument,
                 "moe_gemm2_scatter: the stream-K decode GEMM counts at most ", sm90::kStreamKMaxGroups,
                 " experts (", a.num_experts, ")");
  const Fp8GemmOperands op{a.hq, a.inter, a.sh, a.w2, a.inter, a.sw2, nullptr, a.hidden,
                           a.rows, a.num_experts * a.hidden, a.hidden, a.inter};
  launch_fp8_gemm(c, k.kernel, op, p, stream, family);
}

}  // namespace moekit::detail
