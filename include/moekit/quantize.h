// moekit — GPU quantization kernels (bf16 → FP8 E4M3 with FP32 block scales).
//
// Both functions are asynchronous on `stream`, capturable in a CUDA graph, and produce bit for
// bit what the host quantizers in numerics.h produce from the same bf16 input.
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit {

/// Per-token 1x128 activation quantization.
/// x: bf16 [m, k], row stride ldx elements. q: FP8 E4M3 [m, k], row stride ldq bytes.
/// sa: FP32 scales in the *physical* layout of numerics.h (sa[kb * sfa_ld(m) + row]).
/// Requirements (as the GEMM's TMA needs): m ≥ 0, k ≥ 16 with k % 16 == 0, ldx ≥ k with
/// ldx % 8 == 0, ldq ≥ k with ldq % 16 == 0, x, q and sa 16-byte aligned and non-null when m > 0.
/// Bad shapes throw ErrorCode::kInvalidArgument, bad alignment ErrorCode::kMisaligned.
/// Throws moekit::Error on invalid arguments or launch failure.
void quantize_act_1x128(const void* x, int64_t ldx, int64_t m, int64_t k, void* q, int64_t ldq,
                        float* sa, bool ue8m0, cudaStream_t stream);

/// 128x128 weight quantization (one-time weight preparation).
/// w: bf16 [n, k], row stride ldw elements. q: FP8 [n, k], row stride ldq bytes.
/// sb: FP32 [ceil(n/128), ceil(k/128)] row-major. Same requirements as above.
void quantize_weight_128x128(const void* w, int64_t ldw, int64_t n, int64_t k, void* q, int64_t ldq,
                             float* sb, bool ue8m0, cudaStream_t stream);

}  // namespace moekit
