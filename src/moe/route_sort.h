// The MoE forward's fused routing + single-CTA sort for small batches (route_sort.cu).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "moekit/moe_sort.h"
#include "moekit/routing.h"

namespace moekit::detail {

/// Whether moe_route_sort can run for these sizes (a pure function of them and of the routing
/// configuration); the MoE plan (planning/moe_plan.h) decides with it.
bool moe_route_sort_applies(const RoutingConfig& config, int64_t num_tokens, int local_count);

/// The token-major quantization moe_route_sort may run in the same launch: what
/// quantize_tokens_zeroing(x, num_tokens, hidden, xq, sx, zero_acc, stream, zero_u32, num_zero_u32)
/// (moe_permute.h) does as a kernel of its own.
struct RouteSortQuantize {
  const void* x = nullptr;  ///< [T, hidden] bf16
  int64_t hidden = 0;
  void* xq = nullptr;       ///< [T, hidden] FP8 codes, token-major
  float* sx = nullptr;      ///< 1x128 scales, column t per token (stride sfa_ld(T))
  float* zero_acc = nullptr;     ///< optional [T, hidden] FP32 zeroed alongside
  unsigned* zero_u32 = nullptr;  ///< optional counters zeroed alongside
  int num_zero_u32 = 0;
};

struct ScatterParams;

/// Fills `qp` for the quantization CTAs of a fused launch (quantize_ctas) after validating `q` like
/// quantize_tokens_zeroing; returns their number (0: nothing to quantize). `fn` names the caller.
unsigned fused_quantize_params(const char* fn, const RouteSortQuantize& q, int64_t num_tokens, ScatterParams& qp);

/// Whether moe_sort_quantize can run for these sizes: moe_sort's single-CTA path (a pure function of
/// the sizes); the MoE plan decides with it.
bool moe_sort_quantize_applies(int64_t num_tokens, int top_k, int local_count);

/// moe_sort(topk_ids, ...) on its single-CTA path and quantize_tokens_zeroing in ONE launch: CTAs
/// after the sort's quantize the tokens token-major (the gather variant's input) and zero the
/// accumulator and counters, bit-identical to the two calls, so GEMM1 follows the sort directly —
/// moe_route_sort's quantization for callers that pass top-k ids. Requires
/// moe_sort_quantize_applies(num_tokens, top_k, local_count); validates like moe_sort and the
/// quantization. PDL-aware, graph-capturable, no host synchronization.
void moe_sort_quantize(const int32_t* topk_ids, int64_t num_tokens, int top_k, int num_experts_total,
                       int local_offset, int local_count, const MoeSortBuffers& out, void* workspace,
                       size_t workspace_bytes, const RouteSortQuantize& quantize, cudaStream_t stream);

/// route(config, logits, ...) followed by moe_sort(topk_ids, ...) in ONE launch: the routing warps of
/// the single-CTA sort's CTA route the tokens (writing topk_ids / topk_weights exactly as route()
/// does) and hand each slot's id to the sort through shared memory. Outputs are bit-identical to
/// the two calls. With `quantize`, further CTAs of the same launch quantize the tokens (the
/// gather variant's input; it needs no routing), bit-identical to quantize_tokens_zeroing, so the
/// next kernel (GEMM1) follows the sort directly. Requires moe_route_sort_applies(config,
/// num_tokens, local_count); validates like route(), moe_sort() and the quantization.
/// PDL-aware (runtime/pdl.h), graph-capturable, no host synchronization.
void moe_route_sort(const RoutingConfig& config, const void* logits, LogitsType logits_type, int64_t num_tokens,
                    int32_t* topk_ids, float* topk_weights, int num_experts_total, int local_offset, int local_count,
                    const MoeSortBuffers& out, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                    const RouteSortQuantize* quantize = nullptr);

}  // namespace moekit::detail
