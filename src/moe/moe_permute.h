// Internal forms of permute_quantize_by_token (include/moekit/moe_sort.h) used by the MoE forward and
// the fused sort launches; moe_permute.cu defines them.
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit::detail {

struct ScatterParams;  // quantize_scatter_device.cuh

/// Optional scratch of permute_quantize_by_token_zeroing: with sx set, each token's scales go once
/// to sx [T, ceil(H/128)] (token-major, 16-byte aligned) and a second kernel copies them into
/// sa_perm row by row through permuted_to_expanded (moe_sort's map, consistent with
/// expanded_to_permuted); the same bytes as the per-slot stores, which scatter 4-byte writes over
/// every K block's column of sa_perm (docs/performance.md §Token scales in the permute: 584 → 447-463 us at T = 16384, deepseek-v3).
struct TokenScales {
  float* sx = nullptr;
  const int32_t* permuted_to_expanded = nullptr;
};

/// permute_quantize_by_token, and (zero_acc non-null, 16-byte aligned) zero_acc[t, 0:H] = 0 for
/// every token t in the same launch — the fused GEMM2's FP32 accumulator, without a memset — and
/// zero_u32[0 : num_zero_u32] = 0 (the GEMMs' tile counters; one CTA writes them, so keep them
/// few). `by_token`: see TokenScales (one more launch, PDL-chained).
void permute_quantize_by_token_zeroing(const void* x, int64_t num_tokens, int64_t hidden, int top_k,
                                       const int32_t* expanded_to_permuted, int64_t rows_bound, void* a_perm,
                                       float* sa_perm, bool ue8m0, float* zero_acc, cudaStream_t stream,
                                       unsigned* zero_u32 = nullptr, int num_zero_u32 = 0,
                                       const TokenScales& by_token = {});

/// Quantizes each token of x [T, H] bf16 once (1x128 scales, as quantize_act_1x128) into xq
/// [T, H] FP8 and sx (physical A-scale layout over T rows) — the gather variant's GEMM1 input —
/// with the same zeroing duties as permute_quantize_by_token_zeroing. PDL: writes after the wait.
void quantize_tokens_zeroing(const void* x, int64_t num_tokens, int64_t hidden, void* xq, float* sx, float* zero_acc,
                             cudaStream_t stream, unsigned* zero_u32 = nullptr, int num_zero_u32 = 0);

/// permute_quantize's second half on tokens already quantized: copies token t's FP8 row (xq
/// [T, H], row stride H) and its scales (token-major sx [T, ceil(H/128)]) into every permuted row r
/// with permuted_to_expanded[r] in [0, T · k) (a_perm [rows_bound, H], sa_perm physical over
/// rows_bound); other rows are left alone. 16-byte aligned buffers, H a multiple of 16.
void gather_rows(const void* xq, const float* sx, const int32_t* permuted_to_expanded, int64_t num_tokens,
                 int64_t hidden, int top_k, int64_t rows_bound, void* a_perm, float* sa_perm, cudaStream_t stream);

/// Validates the arguments of permute_quantize_by_token_zeroing (token mode:
/// expanded_to_permuted null, top_k 1, rows_bound = num_tokens — token t's codes go to row t of
/// a_perm, its scales to column t of sa_perm) and fills `q` but for the unroll-dependent fields
/// (set_scatter_unroll). False when there is nothing to write. `fn` names the caller in errors.
bool scatter_params(const char* fn, const void* x, int64_t num_tokens, int64_t hidden, int top_k,
                    const int32_t* expanded_to_permuted, int64_t rows_bound, void* a_perm, float* sa_perm,
                    float* zero_acc, unsigned* zero_u32, int num_zero_u32, ScatterParams& q);

/// Sets the unit fields of `q` for units of 2 * unroll groups.
void set_scatter_unroll(ScatterParams& q, int64_t num_tokens, int unroll);

}  // namespace moekit::detail
