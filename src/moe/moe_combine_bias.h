// The deterministic combine with gpt-oss's second bias (SPEC §6): the layer's rows path adds
// w · b2[e] per slot there, as the scatter-add GEMM2 does in its epilogue.
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit::detail {

/// b2: FP32 [local_count, hidden] or null (then this is moekit::moe_combine); ids [T, k]: the
/// slots' expert ids (a slot with a permuted row has an id in the local slice).
struct MoeCombineBias {
  const float* b2 = nullptr;
  const int32_t* ids = nullptr;
  int local_offset = 0;  ///< the layer's first local expert (ids − local_offset index b2)
};

/// moekit::moe_combine, each kept slot adding topk_weights · (d row + b2[id − local_offset]).
void moe_combine_with_bias(const void* d, int64_t ldd, const int32_t* expanded_to_permuted, const float* topk_weights,
                           int64_t num_tokens, int top_k, int64_t hidden, void* y, int64_t ldy, cudaStream_t stream,
                           const MoeCombineBias& bias);

/// The expert-parallel layer's deterministic rows (MoeForwardRequest::slot_rows): out [T, k, H]
/// bf16, out[t, j] = d[expanded_to_permuted[t * k + j]] for each kept slot (row >= 0); the rows of
/// dropped slots are left unwritten. hidden a multiple of 8, d and out 16-byte aligned.
void moe_rows_to_slots(const void* d, int64_t ldd, const int32_t* expanded_to_permuted, int64_t num_tokens, int top_k,
                       int64_t hidden, void* out, cudaStream_t stream);

}  // namespace moekit::detail
