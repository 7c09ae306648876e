// Internal entry points of the device moe_sort (moe_sort.cu) beside include/moekit/moe_sort.h:
// the host halves of the single-CTA path that the fused route + sort (route_sort.cu) reuses, the
// sort + quantize launch of the MoE forward, and the test hooks that pick a path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "moekit/moe_sort.h"

namespace moekit::detail {

struct RouteSortQuantize;  // route_sort.h
namespace small_sort {
struct Params;  // small_sort_device.cuh: device code, which host-only includers must not see
}

/// moe_sort's argument checks (errors name `fn`); returns n = T * k.
int64_t moe_sort_validate(const char* fn, const int32_t* topk_ids, int64_t num_tokens, int top_k,
                          int num_experts_total, int local_offset, int local_count, const MoeSortBuffers& out,
                          const void* workspace, size_t workspace_bytes);
/// Parameters of the single-CTA path for n = T * k slots (n ≤ kMaxSlots, local_count ≤ kMaxExperts).
small_sort::Params small_sort_params(const int32_t* topk_ids, int64_t n, int num_experts_total, int local_offset,
                                     int local_count, const MoeSortBuffers& out);
/// Its grid: CTA 0 plus the helper CTAs of the -1 fill.
unsigned small_sort_grid(const small_sort::Params& q);

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

// ---- Test hooks of the device moe_sort (not part of the public API) ----

enum class MoeSortPath {
  kAuto,       ///< what moe_sort does: kSingleCta where moe_sort_single_cta says so, else kRadix
  kSingleCta,  ///< one launch, one sorting CTA (throws kInvalidArgument where not eligible)
  kRadix,      ///< memset + classify + cub radix sort + scan + fill
};

/// Whether moe_sort takes the single-CTA path for these sizes (T * k <= 4096, local_count <= 1024).
bool moe_sort_single_cta(int64_t num_tokens, int top_k, int local_count);

/// moe_sort with the path chosen by the caller; same arguments, validation and outputs.
void moe_sort_with_path(MoeSortPath path, const int32_t* topk_ids, int64_t num_tokens, int top_k,
                        int num_experts_total, int local_offset, int local_count, const MoeSortBuffers& out,
                        void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace moekit::detail
