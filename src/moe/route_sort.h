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
