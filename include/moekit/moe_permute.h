// moekit — activation permutation with per-token quantization (SPEC §3–4): each token of x is
// quantized to FP8 once (1x128 scales) and stored to every permuted row moe_sort (moekit/moe_sort.h)
// gave its slots, in the contiguous expert layout the grouped GEMM reads.
// Everything runs on the device with no host synchronization (graph-capturable).
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit {

/// Quantizes each token of x [T, H] bf16 once (1x128 scales, bit for bit quantize_act_1x128) and
/// stores it to every permuted row of the token, in ONE launch with no scratch buffer: for slot
/// j < k of token t with r = expanded_to_permuted[t * k + j] in [0, rows_bound) (-1 and anything
/// outside that range are skipped), a_perm[r, 0:H] (FP8, row stride H) = the token's codes and
/// sa_perm[kb * sfa_ld(rows_bound) + r] = its scale of K block kb. Other rows are not written
/// (padding rows are computed by the grouped GEMM but never stored, so their contents are
/// irrelevant). With the maps of one moe_sort call, a_perm / sa_perm hold exactly what
/// permute_quantize writes from permuted_to_expanded. x [T, H] bf16, row stride H.
/// Requires H % 16 == 0 and x, a_perm, sa_perm 16-byte aligned; T == 0 or rows_bound == 0 is a
/// no-op. Graph-capturable.
void permute_quantize_by_token(const void* x, int64_t num_tokens, int64_t hidden, int top_k,
                               const int32_t* expanded_to_permuted, int64_t rows_bound, void* a_perm, float* sa_perm,
                               bool ue8m0, cudaStream_t stream);

/// The older two-launch form (quantize into xq / sx, then a gather by permuted_to_expanded); same
/// a_perm / sa_perm as permute_quantize_by_token. Prefer permute_quantize_by_token: it reads x once
/// and writes only the permuted rows (no xq round trip).
/// Quantizes each token of x [T, H] bf16 once (1x128 scales, as quantize_act_1x128) and scatters it
/// to every permuted row that uses it: a_perm [rows_bound, H] FP8 (row stride H) and sa_perm in the
/// physical A-scale layout over rows_bound rows. Padding rows are not written: the grouped GEMM
/// computes them but never stores their results, and rows never mix, so their contents are
/// irrelevant. xq / sx: scratch [T, H] FP8 and [T, ceil(H/128)] scales (logical layout).
/// Requires H % 16 == 0 and x, xq, sx, a_perm, sa_perm 16-byte aligned; T == 0 is a no-op.
void permute_quantize(const void* x, int64_t num_tokens, int64_t hidden, int top_k, const int32_t* permuted_to_expanded,
                      int64_t rows_bound, void* xq, float* sx, void* a_perm, float* sa_perm, bool ue8m0,
                      cudaStream_t stream);

}  // namespace moekit
