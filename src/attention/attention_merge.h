// The merge of attention partials (include/moekit/attention.h attention_merge), shared by the
// public op and sparse_attention's split-KV path.
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

namespace moekit::detail {

/// Merges num_sources partials (o [i · source_stride + row, dim] f32, lse [i · source_stride +
/// row]) of `rows` rows (row r's head r % heads) into o_bf16 or o_f32 (one of them) and lse (null:
/// not written). weight_logits [num_sources, heads] and sink [heads] may be null. No checks.
void launch_attention_merge(const float* o_partials, const float* lse_partials, int num_sources,
                            int64_t source_stride, int64_t rows, int heads, int dim, const float* weight_logits,
                            const float* sink, void* o_bf16, float* o_f32, float* lse, cudaStream_t stream);

}  // namespace moekit::detail
